package servetemporal_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRunOffersItsOwnClientToolsOnTemporal: each run's model request
// offers the server's tools and exactly the client tools that run
// declares, as in process: a run that declares tools: [] after one that
// declared get_location is offered none of the client's, and a later run
// that declares get_location again is offered it again.
func TestRunOffersItsOwnClientToolsOnTemporal(t *testing.T) {
	f := newFixture(t)
	thread := newName("thread")
	location := []map[string]any{{"name": "get_location", "description": "where the user is", "parameters": map[string]any{"type": "object", "properties": map[string]any{"precise": map[string]any{"type": "boolean"}}}}}
	none := []map[string]any{}
	runs := []struct {
		tools []map[string]any
		want  []string
	}{
		{location, []string{"pay", "get_location"}},
		{none, []string{"pay"}},
		{location, []string{"pay", "get_location"}},
		{none, []string{"pay"}},
	}
	var msgs []map[string]any
	for i, run := range runs {
		msgs = append(msgs, user("u"+string(rune('1'+i)), "hi"))
		before := len(f.model.Requests())
		status, body := request(t, http.MethodPost, f.url+"/", input(thread, "r"+string(rune('1'+i)), msgs, map[string]any{"tools": run.tools}))
		if status != http.StatusOK {
			t.Fatalf("run %d = %d %s, want 200", i+1, status, body)
		}
		evs := events(t, body)
		if o := outcome(evs); o["type"] != "success" {
			t.Fatalf("run %d: outcome %v: %v", i+1, o, types(evs))
		}
		var answer any
		for _, e := range evs {
			if e["type"] == "TEXT_MESSAGE_START" {
				answer = e["messageId"]
			}
		}
		msgs = append(msgs, map[string]any{"id": answer, "role": "assistant", "content": "hello"})
		reqs := f.model.Requests()[before:]
		if len(reqs) != 1 {
			t.Fatalf("run %d sent %d model requests, want 1", i+1, len(reqs))
		}
		var defs []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(reqs[0].Tools, &defs); err != nil {
			t.Fatalf("run %d: the request's tools %s: %v", i+1, reqs[0].Tools, err)
		}
		var got []string
		for _, d := range defs {
			got = append(got, d.Name)
		}
		if diff := cmp.Diff(run.want, got); diff != "" {
			t.Errorf("run %d (tools %v): the tools its model request offers (-want +got):\n%s", i+1, run.tools, diff)
		}
	}
}
