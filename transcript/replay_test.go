package transcript_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/toolruntest"
	"github.com/toolrun/toolrun/transcript"
)

// outcomes returns each call's outcome by id.
func outcomes(rep *transcript.ReplayReport) map[string]transcript.Outcome {
	out := map[string]transcript.Outcome{}
	for _, c := range rep.Calls {
		out[c.ID] = c.Outcome
	}
	return out
}

func TestReplay(t *testing.T) {
	recording := readBytes(t, record(t, recordedTools().list(), nil))
	same := map[string]transcript.Outcome{
		"toolu_1": transcript.Same,
		"toolu_2": transcript.Reproduced,
		"toolu_3": transcript.Reproduced,
		"toolu_4": transcript.Reproduced, // denied again, as recorded
		"toolu_5": transcript.Same,       // skipped again, with the recorded result
		"toolu_6": transcript.Same,
	}
	with := func(changes map[string]transcript.Outcome) map[string]transcript.Outcome {
		out := map[string]transcript.Outcome{}
		for k, v := range same {
			out[k] = v
		}
		for k, v := range changes {
			out[k] = v
		}
		return out
	}
	tests := []struct {
		name         string
		tools        func() []toolrun.Tool
		want         map[string]transcript.Outcome
		wantDiverged bool
	}{
		{
			name:  "same tools",
			tools: func() []toolrun.Tool { return recordedTools().list() },
			want:  same,
		},
		{
			name: "changed output",
			tools: func() []toolrun.Tool {
				ts := recordedTools()
				ts.weather = func(city string) (string, error) { return "rainy in " + city, nil }
				return ts.list()
			},
			want:         with(map[string]transcript.Outcome{"toolu_1": transcript.OutputChanged, "toolu_6": transcript.OutputChanged}),
			wantDiverged: true,
		},
		{
			name: "fixed failure",
			tools: func() []toolrun.Tool {
				ts := recordedTools()
				ts.fail = func() (string, error) { return "42 rows", nil }
				return ts.list()
			},
			want:         with(map[string]transcript.Outcome{"toolu_2": transcript.Fixed}),
			wantDiverged: true,
		},
		{
			name: "fixed panic",
			tools: func() []toolrun.Tool {
				ts := recordedTools()
				ts.boom = func() (string, error) { return "parsed", nil }
				return ts.list()
			},
			want:         with(map[string]transcript.Outcome{"toolu_3": transcript.Fixed}),
			wantDiverged: true,
		},
		{
			name: "new failure",
			tools: func() []toolrun.Tool {
				ts := recordedTools()
				ts.weather = func(city string) (string, error) { return "", errors.New("weather service unavailable") }
				return ts.list()
			},
			want:         with(map[string]transcript.Outcome{"toolu_1": transcript.NowFails, "toolu_6": transcript.NowFails}),
			wantDiverged: true,
		},
		{
			name: "other failure",
			tools: func() []toolrun.Tool {
				ts := recordedTools()
				ts.fail = func() (string, error) { return "", errors.New("permission denied") }
				return ts.list()
			},
			want:         with(map[string]transcript.Outcome{"toolu_2": transcript.FailsDifferently}),
			wantDiverged: true,
		},
		{
			name: "tool missing",
			tools: func() []toolrun.Tool {
				var out []toolrun.Tool
				for _, tool := range recordedTools().list() {
					if tool.Name() != "parse" {
						out = append(out, tool)
					}
				}
				return out
			},
			// The call is answered as a call of an unknown tool, undecided.
			want:         with(map[string]transcript.Outcome{"toolu_3": transcript.DecidedDifferently}),
			wantDiverged: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := transcript.Replay(t.Context(), recording, tt.tools(), &transcript.ReplayOptions{Options: toolrun.Options{Logger: discard()}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, outcomes(rep)); diff != "" {
				t.Errorf("outcomes (-want +got):\n%s\nreport:\n%s", diff, rep)
			}
			if got := rep.Diverged(); got != tt.wantDiverged {
				t.Errorf("Diverged() = %v, want %v; report:\n%s", got, tt.wantDiverged, rep)
			}
			if rep.RecordedStop != toolrun.StopEndTurn || rep.ReplayedStop != toolrun.StopEndTurn {
				t.Errorf("stops = recorded %q, replayed %q; want end_turn for both", rep.RecordedStop, rep.ReplayedStop)
			}
			if len(rep.ServerErrors) > 0 {
				t.Errorf("fake server errors: %v", rep.ServerErrors)
			}
		})
	}
}

// TestReplayReportGolden pins the report a person reads.
func TestReplayReportGolden(t *testing.T) {
	recording := readBytes(t, record(t, recordedTools().list(), nil))
	ts := recordedTools()
	ts.weather = func(city string) (string, error) { return "rainy in " + city, nil }
	ts.fail = func() (string, error) { return "42 rows", nil }
	rep, err := transcript.Replay(t.Context(), recording, ts.list(), &transcript.ReplayOptions{Options: toolrun.Options{Logger: discard()}})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "replay_report.txt", []byte(rep.String()))
}

// TestReplayKilledRun replays a run that was killed during a tool call: the
// interrupted call runs in the replay and is reported as unfinished in the
// recording, the replay ends where the recording does, and nothing
// diverged.
func TestReplayKilledRun(t *testing.T) {
	full := readBytes(t, record(t, recordedTools().list(), nil))
	// Keep the lines up to toolu_6's start: the run died in that call.
	killed := &transcript.Transcript{Header: full.Header}
	for _, e := range full.Entries {
		killed.Entries = append(killed.Entries, e)
		if e.Type == transcript.TypeToolStarted && e.ToolUseID == "toolu_6" {
			break
		}
	}
	rep, err := transcript.Replay(t.Context(), killed, recordedTools().list(), &transcript.ReplayOptions{Options: toolrun.Options{Logger: discard()}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := outcomes(rep)["toolu_6"], transcript.Unfinished; got != want {
		t.Errorf("toolu_6 outcome = %q, want %q", got, want)
	}
	if rep.RecordedStop != "" || rep.ReplayedStop != "" {
		t.Errorf("stops = recorded %q, replayed %q; want none for both", rep.RecordedStop, rep.ReplayedStop)
	}
	if rep.Diverged() {
		t.Errorf("Diverged() = true, want false; report:\n%s", rep)
	}
}

// TestReplayStreamedRecording replays a run whose responses were streamed:
// the recorded messages are rebuilt from the stream, and serve again.
func TestReplayStreamedRecording(t *testing.T) {
	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, nil)
	s := toolruntest.New(t, toolruntest.Script(script()...))
	opts := runOptions(rec.Observe)
	opts.Stream = true
	if _, err := toolrun.New(client(s), userParams("go"), recordedTools().list(), opts).Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	recording := readBytes(t, buf.Bytes())
	for _, e := range recording.Entries {
		if e.Type == transcript.TypeResponse && e.Turn == 1 && !strings.Contains(string(e.Body), `"id":"toolu_5"`) {
			t.Errorf("the streamed response of turn 1 lacks its calls: %s", e.Body)
		}
	}
	rep, err := transcript.Replay(t.Context(), recording, recordedTools().list(), &transcript.ReplayOptions{Options: toolrun.Options{Logger: discard()}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := len(rep.Calls), 6; got != want || rep.Diverged() {
		t.Errorf("replay of a streamed recording: %d calls, diverged %v; want %d, false. Report:\n%s", got, rep.Diverged(), want, rep)
	}
}

func TestReplayNothing(t *testing.T) {
	tr := readBytes(t, []byte(header))
	if _, err := transcript.Replay(t.Context(), tr, nil, nil); !errors.Is(err, transcript.ErrNothingToReplay) {
		t.Errorf("Replay of an empty transcript: %v, want %v", err, transcript.ErrNothingToReplay)
	}
}

// TestReplayFile is the command line's replay.
func TestReplayFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	if err := os.WriteFile(path, record(t, recordedTools().list(), nil), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	rep, err := transcript.ReplayFile(t.Context(), path, recordedTools().list(), &out)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Diverged() || !strings.HasPrefix(out.String(), "replay matches the recording") {
		t.Errorf("ReplayFile wrote:\n%s\nwant a match", out.String())
	}
	if _, err := transcript.ReplayFile(context.Background(), filepath.Join(t.TempDir(), "missing.jsonl"), nil, &out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReplayFile of a missing file: %v, want %v", err, os.ErrNotExist)
	}
}

// TestReplayApprovedCall replays a run that stopped for a person's approval
// and went on once given: the replay runs the approved call without
// stopping.
func TestReplayApprovedCall(t *testing.T) {
	var buf syncBuffer
	rec := transcript.NewRecorder(&buf, nil)
	tools := func() []toolrun.Tool {
		send := toolrun.NewTool("send_mail", "Sends mail", func(ctx context.Context, in struct {
			To string `json:"to"`
		}) (string, error) {
			return "sent to " + in.To, nil
		})
		send.Policy = policy.RequireApproval("sends e-mail")
		return []toolrun.Tool{send}
	}
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("toolu_1", "send_mail", map[string]string{"to": "ceo@example.com"})),
		toolruntest.Message(toolruntest.Text("Sent.")),
	))
	r := toolrun.New(client(s), userParams("mail the ceo"), tools(), &toolrun.Options{Logger: discard(), OnEvent: rec.Observe})
	res, err := r.Run(t.Context())
	if err != nil || res.StopReason != toolrun.StopAwaitingApproval {
		t.Fatalf("Run = %v, %v; want awaiting_approval", res.StopReason, err)
	}
	if err := r.Decide("toolu_1", toolrun.Decision{}); err != nil {
		t.Fatal(err)
	}
	if res, err := r.Run(t.Context()); err != nil || res.StopReason != toolrun.StopEndTurn {
		t.Fatalf("Run after approval = %v, %v; want end_turn", res.StopReason, err)
	}

	rep, err := transcript.Replay(t.Context(), readBytes(t, buf.Bytes()), tools(), &transcript.ReplayOptions{Options: toolrun.Options{Logger: discard()}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]transcript.Outcome{"toolu_1": transcript.Same}, outcomes(rep)); diff != "" || rep.Diverged() {
		t.Errorf("outcomes (-want +got):\n%s\nreport:\n%s", diff, rep)
	}
}
