package toolrun

import (
	"context"
	"encoding/json"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// messageStream is what a streamed response is read from: the client's own
// stream, or a thread's.
type messageStream interface {
	Next() bool
	Current() anthropic.BetaRawMessageStreamEventUnion
	Err() error
	Close() error
}

// openStream starts a streamed request, on the run's thread with
// Options.Thread.
func (r *Runner) openStream(ctx context.Context, params *anthropic.BetaMessageNewParams, opts ...option.RequestOption) messageStream {
	if r.opts.Thread {
		return r.threadFor(params).SendStreaming(ctx, anthropic.BetaMessageThreadSendParams{}, opts...)
	}
	// As in Runner.send: the body is encoded incrementally (encode.go).
	if body, ok := r.wireCache().body(params, true); ok {
		p, opts := wireRequest(params, body, opts)
		return r.messages.NewStreaming(ctx, p, opts...)
	}
	return r.messages.NewStreaming(ctx, *params, opts...)
}

// threadFor returns the run's thread, set to send params: the thread works
// out which of params.Messages it holds already and sends only the rest.
//
// A thread keeps the system prompt and tools it was created with; when they
// change (Runner.RemoveTools, a BeforeRequest hook), the run starts a new
// thread, whose first request carries the whole history.
func (r *Runner) threadFor(params *anthropic.BetaMessageNewParams) *anthropic.BetaMessageThread {
	tp := threadParams(params)
	key, err := json.Marshal(struct {
		System any `json:"system"`
		Tools  any `json:"tools"`
	}{params.System, params.Tools})
	w := r.wireCache()
	if w.thread == nil || err != nil || string(key) != w.threadKey {
		w.thread = r.messages.NewThread(tp)
		w.threadKey = string(key)
	} else {
		w.thread.Params = tp
	}
	return w.thread
}

// threadParams are params as a thread's, falling back to the whole history
// without a thread when the API cannot take a request on it.
func threadParams(p *anthropic.BetaMessageNewParams) anthropic.BetaMessageThreadCreateParams {
	return anthropic.BetaMessageThreadCreateParams{
		MaxTokens:                  p.MaxTokens,
		Messages:                   p.Messages,
		Model:                      p.Model,
		InferenceGeo:               p.InferenceGeo,
		UserProfileID:              p.UserProfileID,
		WorkspaceID:                p.WorkspaceID,
		Container:                  p.Container,
		FallbackCreditToken:        p.FallbackCreditToken,
		Fallbacks:                  p.Fallbacks,
		Speed:                      p.Speed,
		BillingPolicy:              p.BillingPolicy,
		CacheControl:               p.CacheControl,
		Compaction:                 p.Compaction,
		ContextManagement:          p.ContextManagement,
		Diagnostics:                p.Diagnostics,
		MCPServers:                 p.MCPServers,
		Metadata:                   p.Metadata,
		OutputConfig:               p.OutputConfig,
		OutputFormat:               p.OutputFormat,
		ServiceTier:                p.ServiceTier,
		StopSequences:              p.StopSequences,
		System:                     p.System,
		Thinking:                   p.Thinking,
		ToolChoice:                 p.ToolChoice,
		Tools:                      p.Tools,
		Betas:                      p.Betas,
		UnsupportedRequestBehavior: anthropic.BetaMessageThreadUnsupportedRequestBehaviorContinueUnthreaded,
	}
}
