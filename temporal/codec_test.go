package temporal_test

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/temporal"
	"github.com/toolrun/toolrun/toolruntest"
	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// aesCodec encrypts every payload with AES-GCM, as a production codec
// does; its encoding is named so that a decoder without it fails.
type aesCodec struct{ aead cipher.AEAD }

func newAESCodec(t *testing.T) *aesCodec {
	key := make([]byte, 32)
	rand.Read(key)
	b, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	return &aesCodec{aead: g}
}

const aesEncoding = "binary/toolrun-test-aes"

func (c *aesCodec) Encode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		plain, err := p.Marshal()
		if err != nil {
			return nil, err
		}
		nonce := make([]byte, c.aead.NonceSize())
		rand.Read(nonce)
		out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(aesEncoding)}, Data: c.aead.Seal(nonce, nonce, plain, nil)}
	}
	return out, nil
}

func (c *aesCodec) Decode(ps []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(ps))
	for i, p := range ps {
		if string(p.Metadata[converter.MetadataEncoding]) != aesEncoding {
			out[i] = p
			continue
		}
		n := c.aead.NonceSize()
		if len(p.Data) < n {
			return nil, errors.New("short payload")
		}
		plain, err := c.aead.Open(nil, p.Data[:n], p.Data[n:], nil)
		if err != nil {
			return nil, err
		}
		var q commonpb.Payload
		if err := q.Unmarshal(plain); err != nil {
			return nil, err
		}
		out[i] = &q
	}
	return out, nil
}

// TestEncryptingCodecOnServer runs the whole flow with clients and a worker
// whose data converter encrypts every payload: Pending reads the memo with
// ClientOptions.DataConverter, and without it through the client's own
// converter (given once, to the client, and to a wrapper of the client as
// well), where a client without the codec fails; Follow reads the events
// with no options; a decision is taken, the run ends, and nothing in the
// run's history, memo included, holds the tool input in plain text.
func TestEncryptingCodecOnServer(t *testing.T) {
	plainClient := dialTemporal(t)
	dc := converter.NewCodecDataConverter(converter.GetDefaultDataConverter(), newAESCodec(t))
	c, err := client.NewClientFromExisting(plainClient, client.Options{DataConverter: dc, Logger: nopLogger})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const secret = "/secret-path-4f1c"
	queue := newQueue("toolrun-codec")
	model := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("t1", "write_file", writeIn{Path: secret})),
		toolruntest.Message(toolruntest.Text("Done."))))
	calls := &counter{}
	inProcessWorker(t, c, queue, temporal.NewActivities(model.Client(), []toolrun.Tool{writeTool(calls, policy.RequireApproval("writes change files"))}, &toolrun.Options{Logger: discard()}))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	run, err := temporal.Start(ctx, c, client.StartWorkflowOptions{ID: queue, TaskQueue: queue}, userParams("go"), nil)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "t1 in Pending", func() bool {
		p, err := temporal.Pending(ctx, c, queue, &temporal.ClientOptions{DataConverter: dc})
		if err != nil {
			t.Fatalf("Pending with the client's converter: %v", err)
		}
		return len(p) == 1 && p[0].Call.ID == "t1" && strings.Contains(string(p[0].Call.Input), secret)
	})
	// The converter given once, to the client, serves Pending without
	// options, through a caller's wrapper of the client too.
	wrapped := struct{ client.Client }{c}
	for _, cl := range []client.Client{c, wrapped} {
		p, err := temporal.Pending(ctx, cl, queue, nil)
		if err != nil {
			t.Fatalf("Pending with no options, a client built with the codec: %v", err)
		}
		if len(p) != 1 || !strings.Contains(string(p[0].Call.Input), secret) {
			t.Errorf("Pending with no options: got %+v, want t1 with its input", p)
		}
	}
	if _, err := temporal.Pending(ctx, plainClient, queue, nil); err == nil {
		t.Error("Pending read an encrypted memo through a client without the codec")
	}
	if err := temporal.Decide(ctx, c, queue, "t1", toolrun.Decision{}, nil); err != nil {
		t.Fatal(err)
	}
	var out temporal.Outcome
	if err := run.Get(ctx, &out); err != nil {
		t.Fatal(err)
	}
	if out.StopReason != toolrun.StopEndTurn || out.Text != "Done." {
		t.Errorf("got outcome %q (%s) %q, want end_turn %q", out.StopReason, out.Detail, out.Text, "Done.")
	}
	if diff := cmp.Diff(map[string]int{"write " + secret: 1}, calls.n); diff != "" {
		t.Errorf("writes (-want +got):\n%s", diff)
	}
	// Follow, given no options, decodes the history with the client's
	// converter: the tool's input and the model's answer read in plain.
	var sawInput, sawAnswer bool
	err = temporal.Follow(ctx, c, queue, "", 0, func(e temporal.RunEvent) bool {
		b, _ := json.Marshal(e)
		sawInput = sawInput || strings.Contains(string(b), secret)
		sawAnswer = sawAnswer || strings.Contains(string(b), "Done.")
		return true
	}, nil)
	if err != nil {
		t.Fatalf("Follow with no options, a client built with the codec: %v", err)
	}
	if !sawInput || !sawAnswer {
		t.Errorf("Follow with no options: saw the input %v, the answer %v; want both", sawInput, sawAnswer)
	}
	it := plainClient.GetWorkflowHistory(ctx, queue, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	events := 0
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		events++
		b, _ := proto.Marshal(e) // payload data as it is, not base64
		if strings.Contains(string(b), "secret-path") {
			t.Errorf("event %d (%s) holds the input in plain text", e.GetEventId(), e.GetEventType())
		}
	}
	if events == 0 {
		t.Fatal("no history read")
	}
}
