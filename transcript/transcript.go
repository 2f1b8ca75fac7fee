package transcript

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/toolrun/toolrun"
)

// Format is the value of the header's "format" field.
const Format = "toolrun.transcript"

// Version is the version of the format this package writes, and the newest
// it reads.
const Version = 1

// The types of the lines of a transcript: the value of [Entry].Type.
const (
	// TypeHeader is the first line: the format, its version, the meta.
	TypeHeader = "header"
	// TypeRequest is a request sent, with its body.
	TypeRequest = "request"
	// TypeResponse is a response received whole, with its body.
	TypeResponse = "response"
	// TypeDecision is a tool call decided: allowed, denied, skipped or
	// deferred.
	TypeDecision = "decision"
	// TypeToolStarted is a tool call started.
	TypeToolStarted = "tool_started"
	// TypeToolFinished is a tool call answered, with its result.
	TypeToolFinished = "tool_finished"
	// TypeTurnFinished is a turn committed to the history, with its usage.
	TypeTurnFinished = "turn_finished"
	// TypeStreamRetried is a streamed response that failed and is asked
	// for again: a [toolrun.RequestSent] with Attempt above 1.
	TypeStreamRetried = "stream_retried"
	// TypeCompacted is the history compacted, with the summary.
	TypeCompacted = "compacted"
	// TypeRunStopped is the run stopped, with its stop reason and totals.
	TypeRunStopped = "run_stopped"
	// TypeEvent is an event of a kind this version does not record in
	// full: only its Go type is written, in Event.
	TypeEvent = "event"
)

// ErrFormat is returned by [Read] for input that is not a transcript: its
// first line is not a header of [Format].
var ErrFormat = errors.New("transcript: not a toolrun transcript")

// ErrVersion is returned by [Read] for a transcript of a newer version than
// [Version].
var ErrVersion = errors.New("transcript: unsupported version")

// LineError is returned by [Read] for a line that is not a JSON object, or
// has no type, before the last line.
type LineError struct {
	Line int // counting from 1
	Err  error
}

// Error names the line.
func (e *LineError) Error() string { return fmt.Sprintf("transcript: line %d: %v", e.Line, e.Err) }

// Unwrap returns the line's error.
func (e *LineError) Unwrap() error { return e.Err }

// Entry is one line of a transcript. Type says which fields apply; the
// others are zero and left out of the JSON. See the package documentation
// for each type's fields.
type Entry struct {
	// Type is one of the Type constants, or a type of a later version.
	Type string `json:"type"`
	// Time is when the line's event happened.
	Time time.Time `json:"time"`
	// Turn is the turn the line belongs to, counting from 1; 0 for the
	// header and for a run that stopped before its first response.
	Turn int `json:"turn,omitempty"`

	// Format, Version and Meta are the header's.
	Format  string            `json:"format,omitempty"`
	Version int               `json:"version,omitempty"`
	Meta    map[string]string `json:"meta,omitempty"`

	// Streamed reports that a request's response was streamed.
	Streamed bool `json:"streamed,omitempty"`
	// Compaction marks the request and response lines of a compaction's
	// own request ([toolrun.RequestSent].Compaction): not a turn's, so
	// [Transcript.Turns] and [Replay] leave them out.
	Compaction bool `json:"compaction,omitempty"`
	// Betas are a request's beta headers, which are not in its body.
	Betas []string `json:"betas,omitempty"`
	// Body is a request's params as sent, or a response's message as
	// received.
	Body json.RawMessage `json:"body,omitempty"`

	// ToolUseID, Tool and Input name the call of a decision, tool_started
	// or tool_finished line.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Tool      string          `json:"tool,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	// Decision and By are a decision line's decision and who took it:
	// "policy", "approval", "always" or "default" (an older transcript
	// may say "options" for Options.Policy).
	Decision *toolrun.Decision `json:"decision,omitempty"`
	By       string            `json:"by,omitempty"`
	// Output is a tool_finished call's result content: a JSON array of
	// tool_result content blocks.
	Output json.RawMessage `json:"output,omitempty"`
	// IsError reports that a call's result was sent as an error.
	IsError bool `json:"is_error,omitempty"`
	// Error is why a call failed, a run stopped with an error, or a stream
	// was retried.
	Error string `json:"error,omitempty"`
	// Stack is the stack of a tool that panicked.
	Stack string `json:"stack,omitempty"`
	// Ran reports that a call's tool was run.
	Ran bool `json:"ran,omitempty"`
	// Truncated reports that the model received Output cut short, to the
	// tool's result limit; Output is whole.
	Truncated bool `json:"truncated,omitempty"`
	// DurationMS is how long a tool ran, or a response took from its
	// request, in milliseconds.
	DurationMS float64 `json:"duration_ms,omitempty"`

	// Usage is a turn's tokens (turn_finished), a run's (run_stopped), a
	// compaction's (compacted), or a failed attempt's (stream_retried).
	Usage *toolrun.Usage `json:"usage,omitempty"`
	// StopReason, Detail and the counters are a run_stopped line's.
	StopReason   toolrun.StopReason `json:"stop_reason,omitempty"`
	Detail       string             `json:"detail,omitempty"`
	Turns        int                `json:"turns,omitempty"`
	ToolCalls    int                `json:"tool_calls,omitempty"`
	ToolFailures int                `json:"tool_failures,omitempty"`
	ToolDenials  int                `json:"tool_denials,omitempty"`

	// Attempt, DelayMS and Discarded are a stream_retried line's: the
	// attempt about to be made, the wait before it, and the calls of the
	// failed response that were discarded.
	Attempt   int      `json:"attempt,omitempty"`
	DelayMS   float64  `json:"delay_ms,omitempty"`
	Discarded []string `json:"discarded,omitempty"`

	// Summary, Before, After and ClientSide are a compacted line's: the
	// summary that replaced the history, the history's messages before and
	// after, and whether the runner summarised it itself. Its Usage is what
	// the compaction cost.
	Summary    string `json:"summary,omitempty"`
	Before     int    `json:"before,omitempty"`
	After      int    `json:"after,omitempty"`
	ClientSide bool   `json:"client_side,omitempty"`

	// Event is the Go type of an event line's event.
	Event string `json:"event,omitempty"`
}

// Duration returns DurationMS as a duration.
func (e *Entry) Duration() time.Duration {
	return time.Duration(e.DurationMS * float64(time.Millisecond))
}

// OutputText returns the text blocks of a tool_finished line's Output,
// joined, with a placeholder for each block of another type.
func (e *Entry) OutputText() string { return contentText(e.Output) }

// contentText returns the text of a JSON array of content blocks.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var blocks []struct {
		Type   string `json:"type"`
		Text   string `json:"text"`
		Source struct {
			MediaType string `json:"media_type"`
		} `json:"source"`
	}
	if err := json.Unmarshal(raw, &blocks); err != nil {
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		return string(raw)
	}
	var b strings.Builder
	for i, c := range blocks {
		if i > 0 {
			b.WriteString("\n")
		}
		if c.Type == "text" {
			b.WriteString(c.Text)
			continue
		}
		fmt.Fprintf(&b, "[%s", c.Type)
		if c.Source.MediaType != "" {
			b.WriteString(" " + c.Source.MediaType)
		}
		b.WriteString("]")
	}
	return b.String()
}

// Transcript is a transcript read by [Read].
type Transcript struct {
	// Header is the first line.
	Header Entry
	// Entries are the lines after the header, in order.
	Entries []Entry
	// Torn is the last line when it was cut short, as it is when the
	// process writing the transcript died in the middle of a write. It is
	// not in Entries; everything before it is.
	Torn string
}

// Read reads a transcript. It tolerates a last line cut short (see
// [Transcript.Torn]) and lines of types it does not know, which it keeps in
// Entries; it fails with [ErrFormat] if the first line is not a header,
// [ErrVersion] if the transcript is newer than this package, and a
// *[LineError] for a line before the last that is not a JSON object.
func Read(r io.Reader) (*Transcript, error) {
	br := bufio.NewReader(r)
	t := &Transcript{}
	seenHeader := false
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, fmt.Errorf("transcript: reading line %d: %w", n, err)
		}
		last := err == io.EOF
		if len(bytes.TrimSpace(line)) > 0 {
			var e Entry
			uerr := json.Unmarshal(line, &e)
			if uerr == nil && e.Type == "" {
				uerr = errors.New("no type")
			}
			switch {
			case uerr != nil && last && seenHeader:
				// Every line is written whole, ending with a newline: a
				// last line without one was being written when the
				// writer died.
				t.Torn = string(line)
			case uerr != nil && !seenHeader:
				return nil, fmt.Errorf("%w: line %d: %v", ErrFormat, n, uerr)
			case uerr != nil:
				return nil, &LineError{Line: n, Err: uerr}
			case !seenHeader:
				if e.Type != TypeHeader || e.Format != Format {
					return nil, fmt.Errorf("%w: the first line is not a %s header", ErrFormat, Format)
				}
				if e.Version < 1 || e.Version > Version {
					return nil, fmt.Errorf("%w: version %d; this package reads versions 1 to %d", ErrVersion, e.Version, Version)
				}
				t.Header = e
				seenHeader = true
			default:
				t.Entries = append(t.Entries, e)
			}
		}
		if last {
			break
		}
	}
	if !seenHeader {
		return nil, fmt.Errorf("%w: no header", ErrFormat)
	}
	return t, nil
}

// ReadFile reads the transcript in the named file.
func ReadFile(name string) (*Transcript, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return Read(f)
}

// Stop returns the last run_stopped line, or nil if the run has none: it
// was killed, or is still going.
func (t *Transcript) Stop() *Entry {
	for i := len(t.Entries) - 1; i >= 0; i-- {
		if t.Entries[i].Type == TypeRunStopped {
			return &t.Entries[i]
		}
	}
	return nil
}

// Turn is one turn of a transcript, gathered from its lines by
// [Transcript.Turns].
type Turn struct {
	// Number counts the turns from 1.
	Number int
	// Request is the turn's request; the last one if it was sent again
	// after a failure.
	Request *Entry
	// Response is the turn's response, or nil if none arrived.
	Response *Entry
	// Calls are the turn's tool calls: those of the response in its order,
	// then the calls of failed streamed responses (Discarded).
	Calls []*Call
	// Finished is the turn_finished line, or nil if the turn was not
	// committed to the history.
	Finished *Entry
}

// Call is one tool call of a [Turn].
type Call struct {
	// ID is the call's tool_use id, Tool the tool's name and Input the
	// model's input.
	ID    string
	Tool  string
	Input json.RawMessage
	// Decision is the call's last decision line, Started its tool_started
	// line and Finished its tool_finished line, each nil if there is none.
	Decision *Entry
	Started  *Entry
	Finished *Entry
	// Decisions are all the call's decision lines, in order: a call
	// deferred to a person has the deferral and then the person's answer
	// (or the Always approval, or the deny rule that overrode it).
	Decisions []*Entry
	// Discarded reports that the call was of a streamed response that
	// failed and was requested again: its result was not sent.
	Discarded bool
}

// Failed reports whether the call's result was an error that is a
// failure: not a denial or a skip, whose results may be sent as errors but
// are what a rule decided.
func (c *Call) Failed() bool { return c.Finished != nil && c.Finished.IsError && !c.refused() }

// refused reports whether the call's last decision was to deny or skip it.
func (c *Call) refused() bool {
	if c.Decision == nil || c.Decision.Decision == nil {
		return false
	}
	k := c.Decision.Decision.Kind
	return k == toolrun.Deny || k == toolrun.Skip
}

// responseBody is the part of a recorded response this package reads.
type responseBody struct {
	ID         string            `json:"id"`
	Model      string            `json:"model"`
	Content    []json.RawMessage `json:"content"`
	StopReason string            `json:"stop_reason"`
	Usage      toolrun.Usage     `json:"usage"`
}

// block is the part of a content block this package reads.
type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

func parseResponse(e *Entry) (*responseBody, error) {
	var r responseBody
	if err := json.Unmarshal(e.Body, &r); err != nil {
		return nil, fmt.Errorf("transcript: response of turn %d: %w", e.Turn, err)
	}
	return &r, nil
}

// Turns gathers the lines of t by turn, in order.
func (t *Transcript) Turns() []*Turn {
	var turns []*Turn
	byNumber := map[int]*Turn{}
	calls := map[string]*Call{}
	turn := func(n int) *Turn {
		if tn, ok := byNumber[n]; ok {
			return tn
		}
		tn := &Turn{Number: n}
		byNumber[n] = tn
		turns = append(turns, tn)
		return tn
	}
	call := func(e *Entry) *Call {
		if c, ok := calls[e.ToolUseID]; ok {
			return c
		}
		c := &Call{ID: e.ToolUseID, Tool: e.Tool, Input: e.Input}
		calls[e.ToolUseID] = c
		tn := turn(e.Turn)
		tn.Calls = append(tn.Calls, c)
		return c
	}
	for i := range t.Entries {
		e := &t.Entries[i]
		if e.Compaction && (e.Type == TypeRequest || e.Type == TypeResponse) {
			continue // not a turn's: its compacted line tells the compaction
		}
		switch e.Type {
		case TypeRequest:
			turn(e.Turn).Request = e
		case TypeResponse:
			tn := turn(e.Turn)
			tn.Response = e
			r, err := parseResponse(e)
			if err != nil {
				continue
			}
			// The response's calls come first, in its order.
			var ordered []*Call
			for _, raw := range r.Content {
				var b block
				if json.Unmarshal(raw, &b) != nil || b.Type != "tool_use" {
					continue
				}
				c, ok := calls[b.ID]
				if !ok {
					c = &Call{ID: b.ID, Tool: b.Name, Input: b.Input}
					calls[b.ID] = c
				}
				ordered = append(ordered, c)
			}
			for _, c := range tn.Calls {
				if !containsCall(ordered, c) {
					ordered = append(ordered, c)
				}
			}
			tn.Calls = ordered
		case TypeDecision:
			c := call(e)
			c.Decision = e
			c.Decisions = append(c.Decisions, e)
		case TypeToolStarted:
			call(e).Started = e
		case TypeToolFinished:
			call(e).Finished = e
		case TypeTurnFinished:
			turn(e.Turn).Finished = e
		case TypeStreamRetried:
			// The calls of the failed response are done with: a call of
			// the next attempt may reuse an id.
			for _, id := range e.Discarded {
				if c, ok := calls[id]; ok {
					c.Discarded = true
					delete(calls, id)
				}
			}
		}
	}
	for _, tn := range turns {
		// Discarded calls go last.
		var kept, dropped []*Call
		for _, c := range tn.Calls {
			if c.Discarded {
				dropped = append(dropped, c)
			} else {
				kept = append(kept, c)
			}
		}
		tn.Calls = append(kept, dropped...)
	}
	return turns
}

func containsCall(calls []*Call, c *Call) bool {
	for _, x := range calls {
		if x == c {
			return true
		}
	}
	return false
}
