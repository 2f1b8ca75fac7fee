//go:build hunt2

package toolrunotel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolrunotel"
	"github.com/toolrun/toolrun/toolruntest"
)

// TestHunt2ResultTextNotRecorded: the package documentation promises "Tool
// inputs and results and the messages are not recorded: they may hold
// anything." Yet when AfterTool turns a result into an error (the way the
// Options docs suggest redacting a result: keep the call, flag it), the
// execute_tool span's status description is the text of the result, so the
// very text the hook withheld from the model (here, a credential the tool
// read) is exported to the tracing backend. The runner's logs redact it.
func TestHunt2ResultTextNotRecorded(t *testing.T) {
	const secret = "sk-ant-api03-LEAKEDLEAKEDLEAKEDLEAKED-AAAAAAAA"
	rec := newRecorder(t)
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Reply{ID: "msg_1", Content: []toolruntest.Block{toolruntest.ToolUse("t1", "read_env", nil)}},
		toolruntest.Reply{ID: "msg_2", Content: []toolruntest.Block{toolruntest.Text("Done.")}},
	))
	tool := toolrun.NewTool("read_env", "Reads the environment",
		func(ctx context.Context, in struct{}) (string, error) { return "ANTHROPIC_API_KEY=" + secret, nil })
	obs := toolrunotel.New(toolrunotel.Options{TracerProvider: rec.tp, MeterProvider: rec.mp})
	opts := &toolrun.Options{
		Logger:  discard(),
		OnEvent: obs.Observe,
		AfterTool: func(ctx context.Context, r *toolrun.ToolResult) error {
			for _, c := range r.Content {
				if c.OfText != nil && strings.Contains(c.OfText.Text, "API_KEY") {
					// Flag the result as an error; a later step of this
					// application would replace its text.
					r.IsError = true
				}
			}
			return nil
		},
	}
	r := toolrun.New(s.Client(option.WithMaxRetries(0)), userParams("Env?"), []toolrun.Tool{tool}, opts)
	if _, err := r.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	found := false
	for _, sp := range rec.spans.Ended() {
		if !strings.HasPrefix(sp.Name(), "execute_tool") {
			continue
		}
		found = true
		if d := sp.Status().Description; strings.Contains(d, secret) {
			t.Errorf("span %q: status description = %q; it holds the tool's result text, which the package says is never recorded", sp.Name(), d)
		}
		for _, kv := range sp.Attributes() {
			if strings.Contains(kv.Value.Emit(), secret) {
				t.Errorf("span %q: attribute %s holds the tool's result text", sp.Name(), kv.Key)
			}
		}
	}
	if !found {
		t.Fatal("no execute_tool span")
	}
}
