package transcript

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/internal/redact"
	"github.com/toolrun/toolrun/internal/wire"
)

// RecorderOptions configures a [Recorder]. The zero value is ready to use.
type RecorderOptions struct {
	// Meta is written in the header: the run's name, the program's
	// version, whatever helps find the run later. Its values are redacted
	// like the rest.
	Meta map[string]string

	// Redact, if non-nil, is applied to every string written after the
	// runner's own redaction (see [toolrun.Options].Logger for what that
	// removes), to remove secrets of the application's own.
	Redact func(string) string
}

// Recorder writes a transcript of a run as the run goes. Its Observe method
// is an [toolrun.Options].OnEvent hook.
//
// Each line is written with one Write call on the writer given to
// [NewRecorder], as soon as its event happens, and is flushed if the writer
// has a Flush method (as a *bufio.Writer does): a process that is killed
// loses at most the line being written, and [Read] tolerates that. A
// Recorder is safe for concurrent use; one Recorder may record several runs
// into one transcript, but their lines interleave.
type Recorder struct {
	opts RecorderOptions

	mu  sync.Mutex // guards w and err
	w   io.Writer
	err error
}

// NewRecorder returns a recorder that writes to w, and writes the header
// line. opts may be nil.
func NewRecorder(w io.Writer, opts *RecorderOptions) *Recorder {
	r := &Recorder{w: w}
	if opts != nil {
		r.opts = *opts
		r.opts.Meta = maps.Clone(opts.Meta)
	}
	h := Entry{Type: TypeHeader, Time: now(), Format: Format, Version: Version}
	if len(r.opts.Meta) > 0 {
		h.Meta = map[string]string{}
		for k, v := range r.opts.Meta {
			h.Meta[r.redact(k)] = r.redact(v)
		}
	}
	r.write(&h)
	return r
}

// Err returns the first error writing the transcript, if there was one.
// After an error the recorder writes nothing more, so that no line is
// written after a torn one; the run goes on regardless.
func (r *Recorder) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// Observe records e. It fits [toolrun.Options].OnEvent; to feed other
// observers too, call them one after the other:
//
//	rec := transcript.NewRecorder(f, nil)
//	opts.OnEvent = func(ctx context.Context, e toolrun.Event) {
//		rec.Observe(ctx, e)
//		display(ctx, e)
//	}
//
// Deltas ([toolrun.Delta]) are not recorded: the response line holds the whole message. An event of a kind
// this version of the package does not know is recorded as an "event" line
// with its Go type.
func (r *Recorder) Observe(ctx context.Context, e toolrun.Event) {
	en := Entry{Time: now(), Turn: e.EventTurn()}
	switch e := e.(type) {
	case toolrun.Delta:
		return
	case toolrun.RequestSent:
		if e.Attempt > 1 {
			// A stream asked for again keeps its line of format 1.
			en.Type = TypeStreamRetried
			en.Attempt = e.Attempt
			if e.Err != nil {
				en.Error = r.redact(e.Err.Error())
			}
			// What the failed attempt used: billed, and in no response.
			if te := (*toolrun.TurnError)(nil); errors.As(e.Err, &te) && te.Usage != (toolrun.Usage{}) {
				u := te.Usage
				en.Usage = &u
			}
			en.DelayMS = ms(e.Delay)
			break
		}
		en.Type = TypeRequest
		en.Streamed = e.Streamed
		en.Compaction = e.Compaction
		for _, b := range e.Params.Betas {
			en.Betas = append(en.Betas, r.redact(string(b)))
		}
		body, err := json.Marshal(e.Params)
		if err != nil {
			body, _ = json.Marshal(map[string]string{"error": "transcript: encoding the request: " + err.Error()})
		}
		en.Body = r.redactJSON(body)
	case toolrun.ResponseReceived:
		en.Type = TypeResponse
		en.Compaction = e.Compaction
		en.Body = r.redactJSON(wire.ResponseJSON(e.Message))
		en.DurationMS = ms(e.Duration)
	case toolrun.ToolDecided:
		en.Type = TypeDecision
		r.setCall(&en, e.Call)
		en.Decision = r.redactDecision(e.Decision)
		en.By = string(e.By)
	case toolrun.ToolStarted:
		en.Type = TypeToolStarted
		r.setCall(&en, e.Call)
	case toolrun.ToolFinished:
		en.Type = TypeToolFinished
		res := e.Result
		r.setCall(&en, res.Call)
		if len(res.Content) > 0 {
			if b, err := json.Marshal(res.Content); err == nil {
				en.Output = r.redactJSON(b)
			} else {
				en.Output = r.redactJSON(mustJSON([]map[string]string{{"type": "text", "text": "transcript: encoding the output: " + err.Error()}}))
			}
		}
		en.IsError = res.IsError
		if res.Err != nil {
			en.Error = r.redact(res.Err.Error())
			var pe *toolrun.PanicError
			if errors.As(res.Err, &pe) {
				en.Stack = r.redact(string(pe.Stack))
			}
		}
		en.Ran = res.Ran
		en.Truncated = res.Truncated
		en.DurationMS = ms(res.Duration)
	case toolrun.TurnFinished:
		en.Type = TypeTurnFinished
		u := e.Usage
		en.Usage = &u
	case toolrun.Compacted:
		en.Type = TypeCompacted
		en.Summary = r.redact(e.Summary)
		en.Before, en.After, en.ClientSide = e.Before, e.After, e.ClientSide
		u := e.Usage
		en.Usage = &u
	case toolrun.RunStopped:
		en.Type = TypeRunStopped
		res := e.Result
		en.StopReason = res.StopReason
		en.Detail = r.redact(res.Detail)
		if res.Err != nil {
			en.Error = r.redact(res.Err.Error())
		}
		u := res.Usage
		en.Usage = &u
		en.Turns, en.ToolCalls, en.ToolFailures, en.ToolDenials = res.Turns, res.ToolCalls, res.ToolFailures, res.ToolDenials
	default:
		en.Type = TypeEvent
		en.Event = fmt.Sprintf("%T", e)
	}
	r.write(&en)
}

func (r *Recorder) setCall(en *Entry, c toolrun.ToolCall) {
	en.ToolUseID = c.ID
	en.Tool = c.Name
	if len(c.Input) > 0 {
		en.Input = r.redactJSON(c.Input)
	}
}

// write writes en as one line, with one Write call.
func (r *Recorder) write(en *Entry) {
	line, err := json.Marshal(en)
	if err != nil {
		// Only a value that cannot be encoded gets here; the line says so
		// rather than going missing.
		line = mustJSON(Entry{Type: TypeEvent, Time: en.Time, Turn: en.Turn, Event: en.Type,
			Error: "transcript: encoding the line: " + r.redact(err.Error())})
	}
	line = append(line, '\n')
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return
	}
	if _, err := r.w.Write(line); err != nil {
		r.err = fmt.Errorf("transcript: writing: %w", err)
		return
	}
	if f, ok := r.w.(interface{ Flush() error }); ok {
		if err := f.Flush(); err != nil {
			r.err = fmt.Errorf("transcript: flushing: %w", err)
		}
	}
}

// redact removes the secrets of s.
func (r *Recorder) redact(s string) string { return redactWith(s, r.opts.Redact) }

// redactJSON removes the secrets of the JSON document b.
func (r *Recorder) redactJSON(b []byte) json.RawMessage { return redactJSONWith(b, r.opts.Redact) }

// redactDecision returns d with its reason, input and result redacted.
func (r *Recorder) redactDecision(d toolrun.Decision) *toolrun.Decision {
	b, err := json.Marshal(d)
	if err == nil {
		var out toolrun.Decision
		if err := json.Unmarshal(r.redactJSON(b), &out); err == nil {
			return &out
		}
	}
	return &toolrun.Decision{Kind: d.Kind, Reason: r.redact(d.Reason)}
}

func redactWith(s string, extra func(string) string) string {
	s = redact.String(s)
	if extra != nil {
		s = extra(s)
	}
	return s
}

// redactJSONWith redacts the text of the JSON document b. Should that leave
// it invalid (a secret that spanned a string's end, an extra redaction that
// broke the syntax), it redacts each string of the decoded document
// instead.
func redactJSONWith(b []byte, extra func(string) string) json.RawMessage {
	if out := redactWith(string(b), extra); json.Valid([]byte(out)) {
		return json.RawMessage(compact([]byte(out)))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return mustJSON(redactWith(string(b), extra))
	}
	return mustJSON(redactValue(v, extra))
}

func redactValue(v any, extra func(string) string) any {
	switch v := v.(type) {
	case string:
		return redactWith(v, extra)
	case []any:
		for i := range v {
			v[i] = redactValue(v[i], extra)
		}
		return v
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[redactWith(k, extra)] = redactValue(x, extra)
		}
		return out
	}
	return v
}

// compact returns b without insignificant space, so each line stays one
// line whatever the JSON it holds.
func compact(b []byte) []byte {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return b
	}
	return buf.Bytes()
}

func mustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		return json.RawMessage(strconv.Quote(err.Error()))
	}
	return b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// now is the time of a line.
func now() time.Time { return time.Now().UTC() }
