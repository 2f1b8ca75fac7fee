package serve_test

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	_ "modernc.org/sqlite"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/policy"
	"github.com/toolrun/toolrun/serve"
	"github.com/toolrun/toolrun/toolruntest"
)

// A server with one tool that needs approval: the first run stops with an
// interrupt, and the next run approves it with a resume entry.
func ExampleNew() {
	model := toolruntest.New(nil, toolruntest.Script(
		toolruntest.Message(toolruntest.ToolUse("call_1", "send_email", map[string]any{"to": "ops@example.com"})),
		toolruntest.Message(toolruntest.Text("Sent.")),
	))
	defer model.Close()
	sendEmail := toolrun.NewTool("send_email", "Sends an e-mail", func(ctx context.Context, in struct {
		To string `json:"to"`
	}) (string, error) {
		return "sent to " + in.To, nil
	})

	dir, _ := os.MkdirTemp("", "serve-example")
	defer os.RemoveAll(dir)
	db, _ := sql.Open("sqlite", filepath.Join(dir, "serve.db"))
	defer db.Close()
	db.SetMaxOpenConns(1)

	h, err := serve.New(context.Background(), serve.Config{
		Client:  model.Client(),
		Params:  anthropic.BetaMessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 1024},
		Tools:   []toolrun.Tool{sendEmail},
		Options: toolrun.Options{Policy: policy.RequireApproval("e-mail leaves the company"), Logger: discard},
		DB:      db,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	defer h.Shutdown(context.Background())

	// run posts a RunAgentInput and prints the events' types; it returns
	// the last event.
	run := func(body string) map[string]any {
		resp, err := http.Post(srv.URL, "application/json", strings.NewReader(body))
		if err != nil {
			fmt.Println(err)
			return nil
		}
		defer resp.Body.Close()
		var last map[string]any
		sc := bufio.NewScanner(resp.Body)
		var types []string
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				json.Unmarshal([]byte(data), &last)
				types = append(types, last["type"].(string))
			}
		}
		fmt.Println(strings.Join(types, " "))
		return last
	}
	fin := run(`{"threadId":"t1","runId":"r1","messages":[{"id":"u1","role":"user","content":"Tell ops we are live"}]}`)
	it := fin["outcome"].(map[string]any)["interrupts"].([]any)[0].(map[string]any)
	fmt.Println("interrupt:", it["reason"], it["toolCallId"])

	fin = run(`{"threadId":"t1","runId":"r2","messages":[],"resume":[{"interruptId":"` + it["id"].(string) + `","status":"resolved","payload":{"decision":"approve"}}]}`)
	fmt.Println("outcome:", fin["outcome"].(map[string]any)["type"], fin["result"])
	// Output:
	// RUN_STARTED STEP_STARTED TOOL_CALL_START TOOL_CALL_ARGS TOOL_CALL_END STEP_FINISHED RUN_FINISHED
	// interrupt: tool_call call_1
	// RUN_STARTED STEP_STARTED TOOL_CALL_RESULT STEP_FINISHED STEP_STARTED TEXT_MESSAGE_START TEXT_MESSAGE_CONTENT TEXT_MESSAGE_END STEP_FINISHED RUN_FINISHED
	// outcome: success Sent.
}

var discard = slog.New(slog.DiscardHandler)
