// Package described decodes a workflow's payloads with the data converter
// of the client that described it, for the temporal module's client
// functions and servetemporal, which are given a client.Client and no
// converter.
package described

import (
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
)

// Converter returns the converter of the client that described a run as
// d: see converterOf.
func Converter(d *client.WorkflowExecutionDescription) converter.DataConverter {
	return converterOf{DataConverter: converter.GetDefaultDataConverter(), d: d}
}

// converterOf decodes payloads as the client that described a run
// does: with the data converter it was built with, in the run's
// serialization context, as the workers encoded them. The SDK tells a
// client's converter to no caller, but a description decodes its memo
// with it (GetMemoValue), and so a payload is decoded as the memo value of
// a copy of the description. This holds for any client.Client that
// describes with the SDK's, a caller's wrapper included, where reading the
// converter out of the SDK's client would not. It encodes with the SDK's
// default converter, which nothing of this package does.
type converterOf struct {
	converter.DataConverter // the SDK's default, for what is not decoding
	d                       *client.WorkflowExecutionDescription
}

// FromPayload decodes p into v with the client's converter.
func (dc converterOf) FromPayload(p *commonpb.Payload, v any) error {
	d := *dc.d // a copy: its memo is replaced, and dc may be shared
	d.Memo = &commonpb.Memo{Fields: map[string]*commonpb.Payload{"": p}}
	return d.GetMemoValue("", v)
}

// FromPayloads decodes ps into vs, one payload each, with the client's
// converter.
func (dc converterOf) FromPayloads(ps *commonpb.Payloads, vs ...any) error {
	for i, p := range ps.GetPayloads() {
		if i >= len(vs) {
			break
		}
		if err := dc.FromPayload(p, vs[i]); err != nil {
			return fmt.Errorf("payload %d: %w", i, err)
		}
	}
	return nil
}
