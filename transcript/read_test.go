package transcript_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun/transcript"
)

const header = `{"type":"header","time":"2025-06-01T12:00:00Z","format":"toolrun.transcript","version":1}` + "\n"

func TestRead(t *testing.T) {
	tests := []struct {
		name      string
		in        string
		wantTypes []string
		wantTorn  string
		wantErr   error // matched with errors.Is; nil for success
		wantLine  int   // for a *LineError
	}{
		{
			name:      "whole",
			in:        header + `{"type":"request","time":"2025-06-01T12:00:01Z","turn":1,"body":{}}` + "\n" + `{"type":"run_stopped","time":"2025-06-01T12:00:02Z","turn":1,"stop_reason":"end_turn"}` + "\n",
			wantTypes: []string{"1:request", "1:run_stopped"},
		},
		{
			name:      "torn last line",
			in:        header + `{"type":"request","time":"2025-06-01T12:00:01Z","turn":1}` + "\n" + `{"type":"response","time":"2025-06-01T12:0`,
			wantTypes: []string{"1:request"},
			wantTorn:  `{"type":"response","time":"2025-06-01T12:0`,
		},
		{
			name:      "last line without newline but whole",
			in:        header + `{"type":"request","time":"2025-06-01T12:00:01Z","turn":1}`,
			wantTypes: []string{"1:request"},
		},
		{
			name:      "unknown type and field kept",
			in:        header + `{"type":"from_the_future","time":"2025-06-01T12:00:01Z","turn":2,"new_field":[1]}` + "\n",
			wantTypes: []string{"2:from_the_future"},
		},
		{
			name:      "blank lines",
			in:        header + "\n\n" + `{"type":"request","time":"2025-06-01T12:00:01Z","turn":1}` + "\n\n",
			wantTypes: []string{"1:request"},
		},
		{
			name:     "broken line in the middle",
			in:       header + `{"type":"request",` + "\n" + `{"type":"response","time":"2025-06-01T12:00:01Z","turn":1}` + "\n",
			wantErr:  errAnyLine,
			wantLine: 2,
		},
		{
			name:     "line without type",
			in:       header + `{"time":"2025-06-01T12:00:01Z"}` + "\n",
			wantErr:  errAnyLine,
			wantLine: 2,
		},
		{name: "empty", in: "", wantErr: transcript.ErrFormat},
		{name: "not JSON", in: "hello\n", wantErr: transcript.ErrFormat},
		{name: "no header", in: `{"type":"request","time":"2025-06-01T12:00:01Z","turn":1}` + "\n", wantErr: transcript.ErrFormat},
		{name: "other format", in: `{"type":"header","format":"something.else","version":1}` + "\n", wantErr: transcript.ErrFormat},
		{name: "torn header", in: `{"type":"header","form`, wantErr: transcript.ErrFormat},
		{name: "newer version", in: `{"type":"header","format":"toolrun.transcript","version":2}` + "\n", wantErr: transcript.ErrVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr, err := transcript.Read(strings.NewReader(tt.in))
			var le *transcript.LineError
			switch {
			case tt.wantErr == errAnyLine:
				if !errors.As(err, &le) || le.Line != tt.wantLine {
					t.Fatalf("Read error = %v, want a *LineError for line %d", err, tt.wantLine)
				}
				return
			case tt.wantErr != nil:
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("Read error = %v, want %v", err, tt.wantErr)
				}
				return
			case err != nil:
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(tt.wantTypes, types(tr)); diff != "" {
				t.Errorf("entries (-want +got):\n%s", diff)
			}
			if tr.Torn != tt.wantTorn {
				t.Errorf("Torn = %q, want %q", tr.Torn, tt.wantTorn)
			}
		})
	}
}

var errAnyLine = errors.New("a *LineError")

// TestReadTornGolden cuts the golden transcript at every byte of its last
// lines, as a crash in the middle of a write would, and checks that Read
// keeps each whole line before the cut and reports the rest as torn.
func TestReadTornGolden(t *testing.T) {
	full, err := os.ReadFile("testdata/run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.SplitAfter(full, []byte("\n"))
	// The header, then the last two lines, the turn_finished and the
	// run_stopped, cut at each byte.
	short := slices.Concat(lines[0], lines[len(lines)-3], lines[len(lines)-2])
	for cut := len(lines[0]); cut <= len(short); cut++ {
		in := short[:cut]
		tail := in[bytes.LastIndexByte(in, '\n')+1:]
		wantEntries := bytes.Count(in, []byte("\n")) - 1 // but the header
		wantTorn := ""
		switch {
		case json.Valid(tail):
			wantEntries++ // a whole line but for its newline
		case len(tail) > 0:
			wantTorn = string(tail)
		}
		tr, err := transcript.Read(bytes.NewReader(in))
		if err != nil {
			t.Fatalf("Read of the first %d bytes: %v", cut, err)
		}
		if got := len(tr.Entries); got != wantEntries || tr.Torn != wantTorn {
			t.Fatalf("Read of the first %d bytes: %d entries, torn %q; want %d entries, torn %q", cut, got, tr.Torn, wantEntries, wantTorn)
		}
	}
}

// FuzzRead checks that Read never panics, and that what it reads writes
// back as a transcript that reads the same.
func FuzzRead(f *testing.F) {
	if b, err := os.ReadFile("testdata/run.jsonl"); err == nil {
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Add([]byte(header))
	f.Add([]byte(header + `{"type":"tool_finished","time":"2025-06-01T12:00:01Z","turn":1,"output":[{"type":"text","text":"x"}],"decision":{"kind":"skip","result":[{"type":"text","text":"y"}]}}` + "\n"))
	f.Add([]byte(header + `{"type":"decision","decision":{"kind":"bogus"}}` + "\n"))
	f.Add([]byte(header + `{"type":"x","time":"not a time"}` + "\n"))
	f.Add([]byte(header + "{\"type\":\"x\"}\n{"))
	f.Add([]byte(""))
	f.Add([]byte("\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		tr, err := transcript.Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		if tr.Header.Format != transcript.Format {
			t.Fatalf("read a header of format %q", tr.Header.Format)
		}
		tr.Turns() // must not panic on any input
		var buf bytes.Buffer
		for _, e := range append([]transcript.Entry{tr.Header}, tr.Entries...) {
			b, err := json.Marshal(e)
			if err != nil {
				return // a value JSON cannot encode again, such as a year past 9999
			}
			buf.Write(append(b, '\n'))
		}
		again, err := transcript.Read(bytes.NewReader(buf.Bytes()))
		if err != nil {
			t.Fatalf("reading what was read and written again: %v\n%s", err, buf.Bytes())
		}
		if got, want := len(again.Entries), len(tr.Entries); got != want {
			t.Fatalf("read %d entries again, want %d", got, want)
		}
	})
}
