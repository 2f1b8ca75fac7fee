package toolrun_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
)

// pendingState is a run whose last response asks for one call of name, as a
// suspended run's State would hold it.
func pendingState(t *testing.T, name string) *toolrun.State {
	t.Helper()
	var s toolrun.State
	err := json.Unmarshal([]byte(`{"format":2,
		"params":{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":[{"type":"text","text":"go"}]}]},
		"pending":{"turn":1,"stop_reason":"tool_use",
			"message":{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"`+name+`","input":{}}]},
			"calls":[{"call":{"id":"t1","name":"`+name+`","input":{}},"phase":"new"}]},
		"turns":1}`), &s)
	if err != nil {
		t.Fatal(err)
	}
	return &s
}

// TestTimeoutsInFakeTime checks the tool timeouts with testing/synctest:
// the clock is the bubble's, so a 30-second timeout takes no time, and the
// result says exactly how long the tool had. The calls run through
// Runner.ExecuteCall, which needs no model request.
func TestTimeoutsInFakeTime(t *testing.T) {
	tests := []struct {
		name    string
		tool    func() *toolrun.FuncTool
		opts    toolrun.Options
		want    time.Duration // the timeout the result names; 0 for none
		wantErr bool
	}{
		{
			name: "runner default",
			tool: func() *toolrun.FuncTool {
				return toolrun.NewTool("wait", "", func(ctx context.Context, in struct{}) (string, error) {
					<-ctx.Done()
					return "", ctx.Err()
				})
			},
			opts: toolrun.Options{Timeouts: toolrun.Timeouts{Tool: 30 * time.Second}},
			want: 30 * time.Second, wantErr: true,
		},
		{
			name: "the tool's own timeout wins",
			tool: func() *toolrun.FuncTool {
				ft := toolrun.NewTool("wait", "", func(ctx context.Context, in struct{}) (string, error) {
					<-ctx.Done()
					return "", ctx.Err()
				})
				ft.Timeout = 2 * time.Minute
				return ft
			},
			opts: toolrun.Options{Timeouts: toolrun.Timeouts{Tool: 30 * time.Second}},
			want: 2 * time.Minute, wantErr: true,
		},
		{
			name: "a negative timeout lifts the default",
			tool: func() *toolrun.FuncTool {
				ft := toolrun.NewTool("wait", "", func(ctx context.Context, in struct{}) (string, error) {
					time.Sleep(time.Hour)
					return "slept", nil
				})
				ft.Timeout = -1
				return ft
			},
			opts: toolrun.Options{Timeouts: toolrun.Timeouts{Tool: 30 * time.Second}},
		},
		{
			name: "finishing in time",
			tool: func() *toolrun.FuncTool {
				return toolrun.NewTool("wait", "", func(ctx context.Context, in struct{}) (string, error) {
					time.Sleep(29 * time.Second)
					return "done", nil
				})
			},
			opts: toolrun.Options{Timeouts: toolrun.Timeouts{Tool: 30 * time.Second}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				opts := tt.opts
				opts.Logger = discard()
				client := anthropic.NewClient(option.WithAPIKey("unused"), option.WithBaseURL("http://127.0.0.1:1"))
				r, err := toolrun.Resume(client, pendingState(t, "wait"), []toolrun.Tool{tt.tool()}, &opts)
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				res, err := driver.ExecuteCall(t.Context(), r, "t1")
				if err != nil {
					t.Fatal(err)
				}
				var te *toolrun.TimeoutError
				if got := errors.As(res.Err, &te); got != tt.wantErr {
					t.Fatalf("timed out: %v (%v), want %v", got, res.Err, tt.wantErr)
				}
				if tt.wantErr {
					if te.After != tt.want || time.Since(start) != tt.want || !res.IsError {
						t.Errorf("timed out after %s (the clock moved %s), want %s", te.After, time.Since(start), tt.want)
					}
				}
			})
		})
	}
}
