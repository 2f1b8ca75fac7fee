package toolrunotel

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/redact"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	semconv "go.opentelemetry.io/otel/semconv/v1.41.0"
	"go.opentelemetry.io/otel/semconv/v1.41.0/genaiconv"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the name of the instrumentation scope of the spans and
// metrics this package records.
const ScopeName = "github.com/toolrun/toolrun/toolrunotel"

// ToolDurationName is the name of the histogram of how long tool calls ran,
// in seconds: gen_ai.execute_tool.duration of the GenAI conventions.
const ToolDurationName = "gen_ai.execute_tool.duration"

// Attribute keys of this package's own, for what the GenAI conventions do
// not name.
const (
	turnKey       = attribute.Key("toolrun.turn")
	stopReasonKey = attribute.Key("toolrun.stop_reason")
	decisionKey   = attribute.Key("toolrun.decision")
	decidedByKey  = attribute.Key("toolrun.decided_by")
	ranKey        = attribute.Key("toolrun.tool.ran")
	pendingKey    = attribute.Key("toolrun.pending_calls")
	attemptKey    = attribute.Key("toolrun.attempt")
	compactionKey = attribute.Key("toolrun.compaction")
	unreportedKey = attribute.Key("toolrun.usage.unreported_output_tokens")
)

// Bucket boundaries the GenAI conventions advise for the duration and token
// histograms.
var (
	durationBuckets = []float64{0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92}
	tokenBuckets    = []float64{1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864}
)

// Options configures an [Observer]. The zero value records through the
// global providers of go.opentelemetry.io/otel.
type Options struct {
	// TracerProvider creates the spans. Nil means otel.GetTracerProvider().
	TracerProvider trace.TracerProvider

	// MeterProvider creates the metric instruments. Nil means
	// otel.GetMeterProvider().
	MeterProvider metric.MeterProvider

	// AgentName, if set, is the gen_ai.agent.name of the run span, which is
	// then named "invoke_agent {AgentName}". Empty means a span named
	// "invoke_agent" without the attribute.
	AgentName string
}

// Observer records the spans and metrics of the runs of one
// [toolrun.Runner]; see the package documentation for what it records. Pass
// its [Observer.Observe] method as [toolrun.Options.OnEvent].
//
// An Observer follows one run at a time, its open tool spans keyed by
// tool_use id, so give each Runner its own: [New] is cheap, since the providers hand out the
// same tracer and instruments each time. Observe is safe to call from
// several goroutines, but the events of two runners interleaved on one
// Observer would be recorded as one run.
type Observer struct {
	tracer           trace.Tracer
	agentName        string
	tokenUsage       genaiconv.ClientTokenUsage
	opDuration       genaiconv.ClientOperationDuration
	timeToFirstChunk genaiconv.ClientOperationTimeToFirstChunk
	toolDuration     metric.Float64Histogram

	mu  sync.Mutex // guards run
	run *runState  // nil between runs
}

// runState is the open spans of the run in progress.
type runState struct {
	span  trace.Span    // the parent of the chat and tool spans
	model string        // the first request's, once one is sent
	usage toolrun.Usage // this span's responses only, not a resumed run's
	chat  *chatState    // the model request in flight, if any
	tools map[string]*toolState
	// decided holds the decision of each call by tool_use id, until the
	// call's result arrives.
	decided map[string]toolrun.ToolDecided
}

type chatState struct {
	span    trace.Span
	start   time.Time
	model   string // the request's
	chunked bool   // the first chunk of a streamed response has arrived
	// failed adds up what the request's failed attempts used, as their
	// *toolrun.TurnError reported it: billed, with no response to say so.
	failed toolrun.Usage
}

type toolState struct {
	span trace.Span
}

// New returns an Observer that records through the providers of opts.
// Instruments that cannot be created are reported to otel.Handle and
// record nothing.
func New(opts Options) *Observer {
	tp := opts.TracerProvider
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	mp := opts.MeterProvider
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	meter := mp.Meter(ScopeName, metric.WithSchemaURL(semconv.SchemaURL))
	o := &Observer{
		tracer:    tp.Tracer(ScopeName, trace.WithSchemaURL(semconv.SchemaURL)),
		agentName: opts.AgentName,
	}
	var err error
	if o.tokenUsage, err = genaiconv.NewClientTokenUsage(meter, metric.WithExplicitBucketBoundaries(tokenBuckets...)); err != nil {
		otel.Handle(err)
	}
	if o.opDuration, err = genaiconv.NewClientOperationDuration(meter, metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		otel.Handle(err)
	}
	if o.timeToFirstChunk, err = genaiconv.NewClientOperationTimeToFirstChunk(meter, metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		otel.Handle(err)
	}
	if o.toolDuration, err = meter.Float64Histogram(ToolDurationName,
		metric.WithDescription("Duration of tool calls that ran."),
		metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(durationBuckets...)); err != nil {
		otel.Handle(err)
	}
	return o
}

// Observe records e. It has the signature of [toolrun.Options.OnEvent].
//
// The first event of a run starts the run span, as a child of the span in
// ctx if any; [toolrun.RunStopped] ends it, with every span still open
// under it. An event after that, as when a suspended run is resumed, starts
// a new run span.
func (o *Observer) Observe(ctx context.Context, e toolrun.Event) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.run == nil {
		o.run = o.startRun(ctx)
	}
	// The chat and tool spans are children of the run span, in the event's
	// context: the runner's own context cannot carry the run span.
	ctx = trace.ContextWithSpan(ctx, o.run.span)
	run := o.run
	switch e := e.(type) {
	case toolrun.RequestSent:
		if e.Attempt > 1 && run.chat != nil {
			// A stream asked for again: one chat, another attempt.
			run.chat.span.AddEvent("toolrun.stream_retried", trace.WithAttributes(
				attemptKey.Int(e.Attempt), semconv.ExceptionMessage(redact.String(e.Err.Error()))))
			o.countFailedAttempt(run, e.Err)
			break
		}
		o.startChat(ctx, run, e)
	case toolrun.Delta:
		o.firstChunk(ctx, run)
	case toolrun.ResponseReceived:
		o.endChat(ctx, run, e)
	case toolrun.ToolDecided:
		run.decided[e.Call.ID] = e
	case toolrun.ToolStarted:
		o.startTool(ctx, run, e.Turn, e.Call)
	case toolrun.ToolFinished:
		o.endTool(ctx, run, e)
	case toolrun.RunStopped:
		o.endRun(ctx, run, e.Result)
		o.run = nil
	}
}

func (o *Observer) startRun(ctx context.Context) *runState {
	name := string(genaiconv.OperationNameInvokeAgent)
	attrs := []attribute.KeyValue{semconv.GenAIOperationNameInvokeAgent, semconv.GenAIProviderNameAnthropic}
	if o.agentName != "" {
		name += " " + o.agentName
		attrs = append(attrs, semconv.GenAIAgentName(o.agentName))
	}
	_, span := o.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	return &runState{span: span, tools: map[string]*toolState{}, decided: map[string]toolrun.ToolDecided{}}
}

func (o *Observer) startChat(ctx context.Context, run *runState, e toolrun.RequestSent) {
	if run.chat != nil { // a request without a response: not sent by the runner
		run.chat.span.End()
	}
	var model string
	var maxTokens int64
	if p := e.Params; p != nil {
		model, maxTokens = string(p.Model), p.MaxTokens
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameChat,
		semconv.GenAIProviderNameAnthropic,
		semconv.GenAIRequestModel(model),
		semconv.GenAIRequestMaxTokensKey.Int64(maxTokens),
		turnKey.Int(e.Turn),
	}
	if e.Streamed {
		attrs = append(attrs, semconv.GenAIRequestStream(true))
	}
	if e.Compaction {
		attrs = append(attrs, compactionKey.Bool(true))
	}
	_, span := o.tracer.Start(ctx, string(genaiconv.OperationNameChat)+" "+model,
		trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	run.chat = &chatState{span: span, start: time.Now(), model: model}
	if run.model == "" {
		run.model = model
		run.span.SetAttributes(semconv.GenAIRequestModel(model))
	}
}

// firstChunk records the time to the first chunk of a streamed response.
func (o *Observer) firstChunk(ctx context.Context, run *runState) {
	c := run.chat
	if c == nil || c.chunked {
		return
	}
	c.chunked = true
	d := time.Since(c.start).Seconds()
	c.span.SetAttributes(semconv.GenAIResponseTimeToFirstChunk(d))
	o.timeToFirstChunk.Record(trace.ContextWithSpan(ctx, c.span), d, genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic,
		semconv.GenAIRequestModel(c.model))
}

func (o *Observer) endChat(ctx context.Context, run *runState, e toolrun.ResponseReceived) {
	msg := e.Message
	c := run.chat
	if c == nil { // a response without a request: record it all the same
		o.startChat(ctx, run, toolrun.RequestSent{Turn: e.Turn, Params: &anthropic.BetaMessageNewParams{Model: msg.Model}})
		c = run.chat
	}
	run.chat = nil
	u := e.Usage // as billed, as the run counts it
	addUsage(&run.usage, u)
	addUsage(&u, c.failed) // counted in run.usage as they failed

	c.span.SetAttributes(
		semconv.GenAIResponseID(msg.ID),
		semconv.GenAIResponseModel(string(msg.Model)),
		semconv.GenAIResponseFinishReasons(string(msg.StopReason)),
	)
	c.span.SetAttributes(usageAttrs(u)...)
	c.span.End()

	ctx = trace.ContextWithSpan(ctx, c.span)
	model := []attribute.KeyValue{semconv.GenAIRequestModel(c.model), semconv.GenAIResponseModel(string(msg.Model))}
	o.tokenUsage.Record(ctx, inputTokens(u), genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, genaiconv.TokenTypeInput, model...)
	o.tokenUsage.Record(ctx, u.OutputTokens, genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, genaiconv.TokenTypeOutput, model...)
	o.opDuration.Record(ctx, e.Duration.Seconds(), genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, model...)
}

// failChat ends the model request in flight, which the run's stop cut
// short: with the run's error, or without a status if the run was
// cancelled. A cancelled request's duration is not recorded: it says
// nothing of the model.
func (o *Observer) failChat(ctx context.Context, run *runState, res *toolrun.Result) {
	c := run.chat
	run.chat = nil
	defer c.span.End()
	if res.StopReason != toolrun.StopError || res.Err == nil {
		return
	}
	err := res.Err
	var te *toolrun.TurnError
	if errors.As(err, &te) {
		err = te.Err
	}
	et := semconv.ErrorTypeKey.String(requestErrorType(err))
	setError(c.span, err, et)
	o.opDuration.Record(trace.ContextWithSpan(ctx, c.span), time.Since(c.start).Seconds(),
		genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, semconv.GenAIRequestModel(c.model), et)
}

func (o *Observer) startTool(ctx context.Context, run *runState, turn int, call toolrun.ToolCall) {
	if t := run.tools[call.ID]; t != nil { // started twice: not sent by the runner
		t.span.End()
	}
	attrs := []attribute.KeyValue{
		semconv.GenAIOperationNameExecuteTool,
		semconv.GenAIToolName(toolName(call.Name)),
		semconv.GenAIToolCallID(call.ID),
		semconv.GenAIToolType("function"),
		turnKey.Int(turn),
	}
	if d, ok := run.decided[call.ID]; ok {
		attrs = append(attrs, decisionKey.String(d.Decision.Kind.String()), decidedByKey.String(string(d.By)))
	}
	_, span := o.tracer.Start(ctx, string(genaiconv.OperationNameExecuteTool)+" "+toolName(call.Name),
		trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	run.tools[call.ID] = &toolState{span: span}
}

func (o *Observer) endTool(ctx context.Context, run *runState, e toolrun.ToolFinished) {
	res := e.Result
	t := run.tools[res.Call.ID]
	if t == nil { // answered without running: denied, skipped, invalid, not run
		o.startTool(ctx, run, e.Turn, res.Call)
		t = run.tools[res.Call.ID]
	}
	delete(run.tools, res.Call.ID)
	delete(run.decided, res.Call.ID)
	t.span.SetAttributes(ranKey.Bool(res.Ran))
	var attrs []attribute.KeyValue
	if res.IsError {
		et := semconv.ErrorTypeKey.String(toolErrorType(res.Err))
		attrs = append(attrs, et)
		if res.Err != nil {
			setError(t.span, res.Err, et)
		} else {
			// A hook or a Skip decision made the result an error. Its
			// text is the result's, which is never recorded (an
			// AfterTool hook may flag a result precisely because it
			// holds a secret), so the status says only what happened.
			t.span.SetStatus(codes.Error, resultMarkedError)
			t.span.SetAttributes(et)
		}
	}
	t.span.End()
	if res.Ran {
		ctx = trace.ContextWithSpan(ctx, t.span)
		attrs = append(attrs, semconv.GenAIOperationNameExecuteTool, semconv.GenAIToolName(toolName(res.Call.Name)))
		o.toolDuration.Record(ctx, res.Duration.Seconds(), metric.WithAttributes(attrs...))
	}
}

func (o *Observer) endRun(ctx context.Context, run *runState, res *toolrun.Result) {
	if run.chat != nil {
		o.countFailedChat(ctx, run, res)
		o.failChat(ctx, run, res)
	}
	// Calls still open were cut short by the stop (a cancelled run): they
	// have no result to record.
	for id, t := range run.tools {
		t.span.End()
		delete(run.tools, id)
	}
	run.span.SetAttributes(stopReasonKey.String(string(res.StopReason)))
	run.span.SetAttributes(usageAttrs(run.usage)...)
	if n := len(res.Pending); n > 0 {
		run.span.SetAttributes(pendingKey.Int(n))
	}
	if res.StopReason == toolrun.StopError && res.Err != nil {
		setError(run.span, res.Err, semconv.ErrorTypeKey.String(runErrorType(res.Err)))
	}
	run.span.End()
}

// resultMarkedError is the status description of a tool span whose result
// a hook or a Skip decision made an error, without an error value.
const resultMarkedError = "result marked as error"

// setError marks span as failed with err: an exception event and a status
// with err's message, redacted as the runner's log records are (see
// [toolrun.Options].Logger). An error's message may quote a tool's result,
// a hook's input or the API's answer, any of which may hold a credential,
// so it is never recorded as it is; span.RecordError would record it so.
func setError(span trace.Span, err error, errorType attribute.KeyValue) {
	msg := redact.String(err.Error())
	span.AddEvent(semconv.ExceptionEventName, trace.WithAttributes(
		semconv.ExceptionType(errorTypeName(err)), semconv.ExceptionMessage(msg)))
	span.SetStatus(codes.Error, msg)
	span.SetAttributes(errorType)
}

// errorTypeName is the exception.type of err: its Go type, as
// span.RecordError names it.
func errorTypeName(err error) string {
	t := reflect.TypeOf(err)
	if t.PkgPath() == "" && t.Name() == "" {
		return t.String()
	}
	return fmt.Sprintf("%s.%s", t.PkgPath(), t.Name())
}

// toolName is the name of a called tool, as recorded. The model chose it,
// and a call of an unknown tool may be named anything, a pasted credential
// included; so it is redacted, which leaves a real tool's name as it is.
func toolName(name string) string { return redact.String(name) }

// countFailedAttempt adds the usage of a failed attempt of the request in
// flight, carried by its *toolrun.TurnError, to the request's and the
// run's: the API billed it, and no response will report it.
func (o *Observer) countFailedAttempt(run *runState, err error) {
	var te *toolrun.TurnError
	if !errors.As(err, &te) {
		return
	}
	addUsage(&run.usage, te.Usage)
	if run.chat != nil {
		addUsage(&run.chat.failed, te.Usage)
	}
}

// countFailedChat puts the token counts of the request in flight, which
// the run's stop cut short, on its span and in the token metric: what its
// failed attempts used, the last one's carried by the run's error.
func (o *Observer) countFailedChat(ctx context.Context, run *runState, res *toolrun.Result) {
	o.countFailedAttempt(run, res.Err)
	c := run.chat
	if c.failed == (toolrun.Usage{}) {
		return
	}
	c.span.SetAttributes(usageAttrs(c.failed)...)
	ctx = trace.ContextWithSpan(ctx, c.span)
	model := semconv.GenAIRequestModel(c.model)
	o.tokenUsage.Record(ctx, inputTokens(c.failed), genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, genaiconv.TokenTypeInput, model)
	o.tokenUsage.Record(ctx, c.failed.OutputTokens, genaiconv.OperationNameChat, genaiconv.ProviderNameAnthropic, genaiconv.TokenTypeOutput, model)
}

// addUsage adds v to u, field by field.
func addUsage(u *toolrun.Usage, v toolrun.Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.CacheReadInputTokens += v.CacheReadInputTokens
	u.CacheCreationInputTokens += v.CacheCreationInputTokens
	u.UnreportedOutputTokens += v.UnreportedOutputTokens
}

// inputTokens is gen_ai.usage.input_tokens, which the conventions define to
// include the tokens read from and written to the cache; the API's
// input_tokens leaves them out.
func inputTokens(u toolrun.Usage) int64 {
	return u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
}

func usageAttrs(u toolrun.Usage) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		semconv.GenAIUsageInputTokensKey.Int64(inputTokens(u)),
		semconv.GenAIUsageOutputTokensKey.Int64(u.OutputTokens),
		semconv.GenAIUsageCacheReadInputTokensKey.Int64(u.CacheReadInputTokens),
		semconv.GenAIUsageCacheCreationInputTokensKey.Int64(u.CacheCreationInputTokens),
	}
	if u.UnreportedOutputTokens > 0 {
		attrs = append(attrs, unreportedKey.Int64(u.UnreportedOutputTokens))
	}
	return attrs
}

// toolErrorType is the error.type of a failed call: few values, so that
// metrics can be grouped by it.
func toolErrorType(err error) string {
	var (
		ve *toolrun.ValidationError
		pe *toolrun.PanicError
		te *toolrun.TimeoutError
	)
	switch {
	case err == nil:
		return "tool_error"
	case errors.As(err, &pe):
		return "panic"
	case errors.As(err, &te):
		return "timeout"
	case errors.As(err, &ve):
		return "invalid_input"
	case errors.Is(err, toolrun.ErrUnknownTool):
		return "unknown_tool"
	case errors.Is(err, toolrun.ErrDenied):
		return "denied"
	case errors.Is(err, toolrun.ErrNotRun):
		return "not_run"
	case errors.Is(err, toolrun.ErrInterrupted):
		return "interrupted"
	}
	return "tool_error"
}

// requestErrorType is the error.type of a failed model request: the API's
// error type or HTTP status, as the client's own spans have it.
func requestErrorType(err error) string {
	var apiErr *anthropic.Error
	switch {
	case errors.As(err, &apiErr):
		if t := apiErr.Type(); t != "" {
			return string(t)
		}
		return strconv.Itoa(apiErr.StatusCode)
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, new(*toolrun.TimeoutError)):
		return "timeout" // a request timed out, or a stream sent nothing for Timeouts.StreamIdle
	}
	return semconv.ErrorTypeOther.Value.AsString()
}

// runErrorType is the error.type of a run that stopped with err: its
// request's, if a request failed.
func runErrorType(err error) string {
	var he *toolrun.HookError
	var te *toolrun.TurnError
	switch {
	case errors.As(err, &he):
		return "hook"
	case errors.As(err, &te):
		return requestErrorType(te.Err)
	}
	return semconv.ErrorTypeOther.Value.AsString()
}
