package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// aguiDir is the Node program that drives the server with @ag-ui/client.
const aguiDir = "../../serve/testdata/agui-client"

// serveProc is a "toolrun serve" process.
type serveProc struct {
	cmd    *exec.Cmd
	url    string
	stdout *bytes.Buffer
	done   chan error
}

// startServe starts toolrun serve with args and waits for its address.
func startServe(t *testing.T, args ...string) *serveProc {
	t.Helper()
	bin, _ := binaries(t)
	cmd := exec.Command(bin, append([]string{"serve", "--addr", "127.0.0.1:0"}, args...)...)
	cmd.Env = append(os.Environ(), "ANTHROPIC_API_KEY=")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &serveProc{cmd: cmd, stdout: &bytes.Buffer{}, done: make(chan error, 1)}
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("server stdout:\n%s\nstderr:\n%s", p.stdout, &stderr)
		}
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		p.stdout.WriteString(line + "\n")
		if _, rest, ok := strings.Cut(line, "listening on "); ok {
			p.url, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	go func() {
		for sc.Scan() {
			p.stdout.WriteString(sc.Text() + "\n")
		}
		p.done <- cmd.Wait()
	}()
	if p.url == "" {
		<-p.done
		p.done <- nil
		t.Fatalf("the server did not start:\n%s", &stderr)
	}
	return p
}

// wait waits for the process to exit and returns its status.
func (p *serveProc) wait(t *testing.T) int {
	t.Helper()
	select {
	case err := <-p.done:
		p.done <- err
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0
	case <-time.After(5 * time.Minute):
		t.Fatal("the server did not exit within 5 minutes of the wait: it hangs")
		return -1
	}
}

// TestServeAGUIClient drives toolrun serve with the Node program that
// uses @ag-ui/client from npm: every scenario of drive.mjs.
func TestServeAGUIClient(t *testing.T) {
	node, err := exec.LookPath("node")
	if err == nil {
		_, err = os.Stat(filepath.Join(aguiDir, "node_modules", "@ag-ui", "client", "package.json"))
	}
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set and node or @ag-ui/client is missing (%v); install them with: bash .ci/serve.sh", err)
		}
		t.Skipf("node or @ag-ui/client is missing (%v); install them with: bash .ci/serve.sh", err)
	}
	p := startServe(t, "--db", filepath.Join(t.TempDir(), "serve.db"), "--script", filepath.Join(aguiDir, "scenes.jsonl"),
		"--workdir", filepath.Join(aguiDir, "files"), "--require-approval", "read_file")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "drive.mjs", p.url)
	cmd.Dir = aguiDir
	out, err := cmd.CombinedOutput()
	t.Logf("drive.mjs:\n%s", out)
	if err != nil {
		t.Fatalf("drive.mjs: %v", err)
	}
	if !strings.Contains(string(out), "agui-client: 9 scenarios ok") {
		t.Fatalf("drive.mjs did not report its 9 scenarios")
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(t); code != 0 {
		t.Errorf("exit status after SIGTERM %d, want 0", code)
	}
}

// postRun posts a RunAgentInput and returns the events' JSON objects.
func postRun(t *testing.T, url string, in map[string]any) []map[string]any {
	t.Helper()
	b, _ := json.Marshal(in)
	resp, err := http.Post(url+"/", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		body, _ := io.ReadAll(resp.Body)
		t.Fatalf("run: %d %s", resp.StatusCode, body)
	}
	return sseEvents(t, resp.Body, nil)
}

// sseEvents reads the events of an SSE stream; stop, if non-nil, is told
// of each and ends the read when it returns true.
func sseEvents(t *testing.T, r io.Reader, stop func(map[string]any) bool) []map[string]any {
	t.Helper()
	var evs []map[string]any
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		var e map[string]any
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatal(err)
		}
		evs = append(evs, e)
		if stop != nil && stop(e) {
			break
		}
	}
	return evs
}

func toolResults(evs []map[string]any) map[string]string {
	out := map[string]string{}
	for _, e := range evs {
		if e["type"] == "TOOL_CALL_RESULT" {
			out[e["toolCallId"].(string)] = e["content"].(string)
		}
	}
	return out
}

// TestServeResumeAfterSIGKILL kills the server twice: once with a
// decision recorded and not yet acted on, once while the run after the
// tools waits for the model. No decision is lost, the pending call stays
// pending, and no call runs twice.
func TestServeResumeAfterSIGKILL(t *testing.T) {
	dir := t.TempDir()
	db := filepath.Join(dir, "serve.db")
	files := filepath.Join(dir, "files")
	os.Mkdir(files, 0o755)
	os.WriteFile(filepath.Join(files, "a.txt"), []byte("hello from a.txt\n"), 0o644)
	os.WriteFile(filepath.Join(files, "b.txt"), []byte("hello from b.txt\n"), 0o644)
	script := func(name string, delayMS int) string {
		path := filepath.Join(dir, name)
		lines := `{"scene":"read both","content":[{"type":"tool_use","id":"call_a","name":"read_file","input":{"path":"a.txt"}},{"type":"tool_use","id":"call_b","name":"read_file","input":{"path":"b.txt"}}]}
{"delay_ms":` + jsonInt(delayMS) + `,"content":[{"type":"text","text":"done"}]}
`
		os.WriteFile(path, []byte(lines), 0o644)
		return path
	}
	slow, fast := script("slow.jsonl", 600000), script("fast.jsonl", 0)
	args := func(s string) []string {
		return []string{"--db", db, "--script", s, "--workdir", files, "--require-approval", "read_file"}
	}

	a := startServe(t, args(slow)...)
	evs := postRun(t, a.url, map[string]any{"threadId": "t", "runId": "r1", "messages": []any{map[string]any{"id": "u1", "role": "user", "content": "read both"}}})
	outcome := evs[len(evs)-1]["outcome"].(map[string]any)
	ids := map[string]string{}
	for _, it := range outcome["interrupts"].([]any) {
		it := it.(map[string]any)
		ids[it["toolCallId"].(string)] = it["id"].(string)
	}
	if len(ids) != 2 {
		t.Fatalf("interrupts %v, want two", outcome)
	}
	resp, err := http.Post(a.url+"/api/interrupts/"+ids["call_b"]+"/decision", "application/json", strings.NewReader(`{"decision":"approve"}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("deciding call_b: %v %v", err, resp)
	}
	resp.Body.Close()
	a.cmd.Process.Signal(syscall.SIGKILL)
	a.wait(t)

	b := startServe(t, args(slow)...)
	resp, err = http.Get(b.url + "/api/pending")
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Pending []struct{ ID, ToolCallID string }
	}
	json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if len(list.Pending) != 1 || list.Pending[0].ToolCallID != "call_a" || list.Pending[0].ID != ids["call_a"] {
		t.Fatalf("pending after SIGKILL: %+v, want call_a's interrupt alone", list.Pending)
	}
	// Deny call_a; both calls are answered, then the run waits for the
	// model, and the server is killed there.
	body, _ := json.Marshal(map[string]any{"threadId": "t", "runId": "r2", "messages": []any{}, "resume": []any{map[string]any{"interruptId": ids["call_a"], "status": "resolved", "payload": map[string]any{"decision": "deny", "reason": "not a"}}}})
	resp, err = http.Post(b.url+"/", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	evs = sseEvents(t, resp.Body, func(e map[string]any) bool {
		if e["type"] == "TOOL_CALL_RESULT" {
			seen[e["toolCallId"].(string)] = true
		}
		return e["type"] == "STEP_STARTED" && len(seen) == 2
	})
	resp.Body.Close()
	got := toolResults(evs)
	if !strings.Contains(got["call_b"], "hello from b.txt") || !strings.Contains(got["call_a"], "not a") {
		t.Fatalf("results before the kill %v: want b read (decided before the first kill) and a denied", got)
	}
	b.cmd.Process.Signal(syscall.SIGKILL)
	b.wait(t)

	c := startServe(t, args(fast)...)
	resp, err = http.Get(c.url + "/runs/r2/events")
	if err != nil {
		t.Fatal(err)
	}
	evs = sseEvents(t, resp.Body, nil)
	resp.Body.Close()
	if last := evs[len(evs)-1]; last["type"] != "RUN_ERROR" || last["code"] != "interrupted" {
		t.Errorf("the killed run's stream ends with %v, want RUN_ERROR interrupted", last)
	}
	evs = postRun(t, c.url, map[string]any{"threadId": "t", "runId": "r3", "messages": []any{}})
	if last := evs[len(evs)-1]; last["type"] != "RUN_FINISHED" || last["result"] != "done" {
		t.Fatalf("the thread after the second kill ends with %v, want done", last)
	}
	if got := toolResults(evs); len(got) != 0 {
		t.Errorf("calls answered again after the restart: %v", got)
	}
}

func jsonInt(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestServeDrainsOnSIGTERM: a run in flight finishes, a new one is
// refused, and the process exits 0.
func TestServeDrainsOnSIGTERM(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.jsonl")
	os.WriteFile(script, []byte(`{"scene":"slow","delay_ms":2000,"content":[{"type":"text","text":"made it"}]}`+"\n"), 0o644)
	p := startServe(t, "--db", filepath.Join(dir, "serve.db"), "--script", script, "--grace", "1m")
	body, _ := json.Marshal(map[string]any{"threadId": "t", "runId": "r1", "messages": []any{map[string]any{"id": "u1", "role": "user", "content": "slow"}}})
	resp, err := http.Post(p.url+"/", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs := sseEvents(t, resp.Body, func(e map[string]any) bool { return e["type"] == "STEP_STARTED" })
	p.cmd.Process.Signal(syscall.SIGTERM)
	// The drain refuses new runs; wait until it has begun.
	for i := 0; ; i++ {
		body, _ := json.Marshal(map[string]any{"threadId": "t2", "runId": "r" + jsonInt(i+2), "messages": []any{map[string]any{"id": "u1", "role": "user", "content": "slow"}}})
		r2, err := http.Post(p.url+"/", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("a new run during the drain: %v, want a 503", err)
		}
		r2.Body.Close()
		if r2.StatusCode == http.StatusServiceUnavailable {
			break
		}
		if i > 1000 {
			t.Fatalf("new runs still start after SIGTERM: %d", r2.StatusCode)
		}
	}
	evs = append(evs, sseEvents(t, resp.Body, nil)...)
	if last := evs[len(evs)-1]; last["type"] != "RUN_FINISHED" || last["result"] != "made it" {
		t.Errorf("the run in flight ended with %v, want it finished", last)
	}
	if code := p.wait(t); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
}

// A server on an address others can reach needs tokens.
func TestServeRefusesExposedAddrWithoutTokens(t *testing.T) {
	for _, addr := range []string{"0.0.0.0:0", ":0", "192.0.2.1:0"} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), []string{"serve", "--addr", addr, "--db", filepath.Join(t.TempDir(), "db")}, strings.NewReader(""), &stdout, &stderr, func(string) string { return "" })
		if code != exitUsage || !strings.Contains(stderr.String(), "--tokens") {
			t.Errorf("--addr %s: exit %d, stderr %q; want a usage error naming --tokens", addr, code, stderr.String())
		}
	}
}

// TestServeTemporalUnreachable: --temporal with no Temporal server there
// is an error naming the flag and the address, and nothing listens.
func TestServeTemporalUnreachable(t *testing.T) {
	dir := t.TempDir()
	script := filepath.Join(dir, "s.jsonl")
	if err := os.WriteFile(script, []byte(`{"content":[{"type":"text","text":"hi"}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got := runCLI(t, noEnv, "", "serve", "--db", filepath.Join(dir, "serve.db"), "--script", script, "--addr", "127.0.0.1:0", "--temporal", "127.0.0.1:1")
	if got.code != exitError || !strings.Contains(got.stderr, "--temporal 127.0.0.1:1") {
		t.Errorf("exit %d, stderr %q; want %d naming --temporal 127.0.0.1:1", got.code, got.stderr, exitError)
	}
	if strings.Contains(got.stdout, "listening") {
		t.Errorf("the server started: %s", got.stdout)
	}
}

// TestServeHTTPServerBounds: the listening server bounds what a client can
// hold with no request in flight: the headers' time and size, and idle
// keep-alive connections.
func TestServeHTTPServerBounds(t *testing.T) {
	srv := httpServer(http.NotFoundHandler())
	if srv.ReadHeaderTimeout <= 0 || srv.IdleTimeout <= 0 || srv.MaxHeaderBytes <= 0 || srv.MaxHeaderBytes > 1<<20 {
		t.Errorf("ReadHeaderTimeout %v, IdleTimeout %v, MaxHeaderBytes %d: want each bounded", srv.ReadHeaderTimeout, srv.IdleTimeout, srv.MaxHeaderBytes)
	}
}
