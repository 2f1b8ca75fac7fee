package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
)

func TestRun(t *testing.T) {
	tests := []struct {
		name        string
		input       string
		wantResult  string // what the model was told publish_release did
		wantIsError bool
	}{
		{"approve", "y\n", "published v1.4.1", false},
		{"always", "a\n", "published v1.4.1", false},
		{"deny with a reason", "n\nnot on a Friday\n", "tool call denied: not on a Friday", true},
		{"no answer", "", "tool call denied: nobody answered the approval prompt", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stateFile := filepath.Join(t.TempDir(), "state.json")
			var out, errOut bytes.Buffer
			res, err := run(t.Context(), strings.NewReader(tt.input), &out, &errOut, stateFile, false)
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out.String())
			}
			if got, want := res.StopReason, toolrun.StopEndTurn; got != want {
				t.Errorf("StopReason = %q, want %q", got, want)
			}
			got, isError := toolResult(res, "toolu_02")
			if got != tt.wantResult || isError != tt.wantIsError {
				t.Errorf("publish_release result = %q (is_error %v), want %q (is_error %v)", got, isError, tt.wantResult, tt.wantIsError)
			}
			if !strings.Contains(out.String(), "resumed from "+stateFile) {
				t.Errorf("output does not say the run resumed from %s:\n%s", stateFile, out.String())
			}

			// The saved state is the suspended run, awaiting the release.
			b, err := os.ReadFile(stateFile)
			if err != nil {
				t.Fatal(err)
			}
			var s toolrun.State
			if err := json.Unmarshal(b, &s); err != nil {
				t.Fatal(err)
			}
			if s.StopReason != toolrun.StopAwaitingApproval {
				t.Fatalf("saved state: stop reason %q; want a run awaiting approval", s.StopReason)
			}
			var ids []string
			for _, c := range s.Calls() {
				ids = append(ids, c.ID)
			}
			if diff := cmp.Diff([]string{"toolu_02"}, ids); diff != "" {
				t.Errorf("pending calls in the saved state (-want +got):\n%s", diff)
			}
		})
	}
}

// toolResult returns the text and error flag of the tool_result for id in
// the run's history.
func toolResult(res *toolrun.Result, id string) (string, bool) {
	for _, m := range res.Messages {
		if m.OfUser == nil {
			continue
		}
		for _, b := range m.OfUser.Content {
			tr := b.OfToolResult
			if tr == nil || tr.ToolUseID != id {
				continue
			}
			var parts []string
			for _, c := range tr.Content {
				if c.OfText != nil {
					parts = append(parts, c.OfText.Text)
				}
			}
			return strings.Join(parts, " "), tr.IsError.Value
		}
	}
	return "", false
}
