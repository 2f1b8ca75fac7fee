package toolrunotel

import "github.com/anthropics/anthropic-sdk-go/v2/option"

// ClientOptions returns the options to build the anthropic client of a
// runner observed by an [Observer] with: they turn off the client's own
// OpenTelemetry spans (option.WithoutOpenTelemetry), so that each model
// request has one chat span, the Observer's, under the run span.
//
//	client := anthropic.NewClient(toolrunotel.ClientOptions()...)
//
// Without them, a client emits a span of its own for every call
// ("anthropic.messages.create", also a chat span in the GenAI
// conventions) whenever a global tracer provider is registered: two chat
// spans for each request, the client's outside the run span. The options
// apply to every call of the client they are given to; give them to a
// client of its own to keep the client's spans for other calls, or pass
// them to a single call, as any request option.
func ClientOptions() []option.RequestOption {
	return []option.RequestOption{option.WithoutOpenTelemetry()}
}
