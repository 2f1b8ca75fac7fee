package serve_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/serve"
)

// startAs runs thread with text as the client of token, with the
// RunAgentInput's extra keys, and returns the ids of the interrupts it
// stopped for, or the refusal's status and body.
func (e *inboxEnv) startAs(t *testing.T, token, thread, text string, extra map[string]any) ([]string, int, string) {
	t.Helper()
	b, _ := json.Marshal(input(thread, "run-"+thread, []map[string]any{user("m-"+thread, text)}, extra))
	req, _ := http.NewRequest(http.MethodPost, e.url+"/agui", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, resp.StatusCode, string(body)
	}
	evs, _ := readSSE(t, resp.Body)
	var ids []string
	for _, it := range interrupts(t, evs) {
		ids = append(ids, it["id"].(string))
	}
	return ids, http.StatusOK, ""
}

// bearer sends a request of the JSON API with token and returns the
// status and body of the answer.
func (e *inboxEnv) bearer(t *testing.T, method, path, token, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, e.url+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// withTokens restarts e's server with tokens added to its own.
func (e *inboxEnv) withTokens(t *testing.T, tokens ...serve.Token) {
	t.Helper()
	e.cfg.Tokens = append(e.cfg.Tokens, tokens...)
	e.restart(t)
}
