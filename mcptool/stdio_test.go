package mcptool_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/mcptool"
	"github.com/toolrun/toolrun/toolruntest"
)

// crashServer is the test server, built once for every test that runs it.
var crashServer struct {
	once sync.Once
	dir  string // removed by TestMain
	bin  string
	err  error
}

// TestMain removes the test server built by buildCrashServer.
func TestMain(m *testing.M) {
	code := m.Run()
	if crashServer.dir != "" {
		os.RemoveAll(crashServer.dir)
	}
	os.Exit(code)
}

// buildCrashServer builds testdata/crashserver, once, and returns its path.
func buildCrashServer(t testing.TB) string {
	t.Helper()
	crashServer.once.Do(func() {
		goTool, err := exec.LookPath("go")
		if err != nil {
			crashServer.err = fmt.Errorf("the go command is needed to build the test server: %w", err)
			return
		}
		if crashServer.dir, err = os.MkdirTemp("", "crashserver"); err != nil {
			crashServer.err = err
			return
		}
		crashServer.bin = filepath.Join(crashServer.dir, "crashserver")
		if out, err := exec.Command(goTool, "build", "-o", crashServer.bin, "./testdata/crashserver").CombinedOutput(); err != nil {
			crashServer.err = fmt.Errorf("building the test server: %w\n%s", err, out)
		}
	})
	if crashServer.err != nil {
		t.Fatal(crashServer.err)
	}
	return crashServer.bin
}

// TestStdio runs a real MCP server process over stdio: see
// testdata/crashserver.
func TestStdio(t *testing.T) {
	bin := buildCrashServer(t)

	t.Run("end to end", func(t *testing.T) {
		log, logs := newLogger()
		s := connect(t, "srv", mcptool.Command(bin), &mcptool.Options{Logger: log, Restart: mcptool.RestartPolicy{MaxRestarts: 1}})
		model := toolruntest.New(t, toolruntest.Script(
			toolruntest.Message(toolruntest.ToolUse("t1", "srv__echo", map[string]string{"text": "hi"})),
			toolruntest.Message(toolruntest.ToolUse("t2", "srv__fail", map[string]string{"text": "boom"})),
			toolruntest.Message(toolruntest.ToolUse("t3", "srv__crash", nil)),
			toolruntest.Message(toolruntest.ToolUse("t4", "srv__echo", map[string]string{"text": "again"})),
			toolruntest.Message(toolruntest.Text("done")),
		))
		res, err := toolrun.New(client(model), userParams("go"), tools(t, s), &toolrun.Options{Logger: log}).Run(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if res.StopReason != toolrun.StopEndTurn {
			t.Fatalf("StopReason = %q, want end_turn", res.StopReason)
		}
		var got []result
		for _, req := range model.Requests()[1:] {
			got = append(got, results(req)...)
		}
		check(t, "tool results", got, []result{
			{Text: "hi"},
			{Text: "boom", IsError: true},
			{Text: `MCP server "srv" exited (exit status 3) while handling "crash"; it will be restarted for the next call (restart 1 of 1)`, IsError: true},
			{Text: "again"},
		})

		exits := logs.records(t, "mcptool: MCP server exited")
		if len(exits) != 1 {
			t.Fatalf("got %d exit records, want 1", len(exits))
		}
		check(t, "exit record", map[string]any{
			"level": exits[0]["level"], "server": exits[0]["server"], "exit": exits[0]["exit"],
			"in_flight": exits[0]["in_flight"], "stderr": exits[0]["stderr"],
		}, map[string]any{
			"level": "ERROR", "server": "srv", "exit": "exit status 3",
			"in_flight": []any{"crash"}, "stderr": "crashserver started\ncrashserver: fatal: crash requested",
		})
		if got := len(logs.records(t, "mcptool: MCP server restarted")); got != 1 {
			t.Errorf("got %d restart records, want 1", got)
		}
		if got := len(logs.records(t, "toolrun: tool call failed")); got != 2 {
			t.Errorf("got %d records of failed calls, want 2 (fail, crash)", got)
		}
		if err := s.Close(); err != nil {
			t.Errorf("Close() = %v, want nil: the server exits with status 0 when its stdin closes", err)
		}
	})

	t.Run("never restarted", func(t *testing.T) {
		s := connect(t, "srv", mcptool.Command(bin), nil)
		runSteps(t, tools(t, s), "srv", []step{
			{tool: "crash", want: `MCP server "srv" exited (exit status 3) while handling "crash"; it is not restarted, as its restart policy allows no restarts`, wantErr: mcptool.ErrServerExited},
			{tool: "echo", want: `MCP server "srv" is down: it exited (exit status 3), and it is not restarted, as its restart policy allows no restarts`, wantErr: mcptool.ErrServerDown},
		})
	})

	t.Run("hang", func(t *testing.T) {
		log, logs := newLogger()
		s := connect(t, "srv", mcptool.Command(bin), &mcptool.Options{Logger: log, CallTimeout: 500 * time.Millisecond})
		ts := tools(t, s)
		_, err := find(t, ts, "srv__hang").Run(t.Context(), nil)
		const want = `MCP server "srv" did not answer the call of "hang" within 500ms; the call was cancelled`
		if !errors.Is(err, mcptool.ErrNoAnswer) || err.Error() != want {
			t.Errorf("hang: error = %v, want %s", err, want)
		}
		// The server answered the ping, so it was kept.
		content, err := find(t, ts, "srv__echo").Run(t.Context(), []byte(`{"text":"still here"}`))
		if err != nil || len(content) != 1 || content[0].OfText.Text != "still here" {
			t.Errorf("echo after hang = %+v, %v; want still here", content, err)
		}
		if recs := logs.records(t, "mcptool: MCP server exited"); len(recs) != 0 {
			t.Errorf("exit records = %v, want none", recs)
		}
	})

	t.Run("fails to start", func(t *testing.T) {
		_, err := mcptool.Connect(t.Context(), "bad", mcptool.Command(bin, "-exit"), &mcptool.Options{Logger: discardLogger()})
		const prefix, suffix = `mcptool: connecting to MCP server "bad": `, "; its stderr ends with: crashserver: bad config"
		if err == nil || !strings.HasPrefix(err.Error(), prefix) || !strings.HasSuffix(err.Error(), suffix) {
			t.Errorf("Connect error = %v, want %q…%q", err, prefix, suffix)
		}
	})
}
