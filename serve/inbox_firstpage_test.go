package serve_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/toolrun/toolrun/toolruntest"
)

// TestInboxReadyCarriesTheFirstPage: the change stream's first event is
// the list's first page, as the pending list answers it, so the page
// draws its rows from the stream without a second reading of the list.
func TestInboxReadyCarriesTheFirstPage(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 150)
	c, key := e.login(t, aliceToken)
	get := func(path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		req.Header.Set("X-Inbox-Key", key)
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	for _, q := range []string{"", "?tool=tool_3"} {
		resp := get("/inbox/api/events" + q)
		br := bufio.NewReader(resp.Body)
		var event, data string
		for event == "" || data == "" {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%q: reading the first event: %v", q, err)
			}
			if v, ok := strings.CutPrefix(line, "event: "); ok {
				event = strings.TrimSpace(v)
			}
			if v, ok := strings.CutPrefix(line, "data: "); ok {
				data = strings.TrimSpace(v)
			}
		}
		resp.Body.Close()
		if event != "ready" {
			t.Fatalf("%q: the first event is %q, want ready", q, event)
		}
		resp = get("/inbox/api/pending" + q)
		want, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var got, listed map[string]any
		if err := json.Unmarshal([]byte(data), &got); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(want, &listed); err != nil {
			t.Fatal(err)
		}
		delete(got, "now")
		delete(listed, "now")
		if diff := cmp.Diff(listed, got); diff != "" {
			t.Errorf("%q: the ready event is not the pending list's first page (-pending +ready):\n%s", q, diff)
		}
		calls, _ := got["pending"].([]any)
		if matching, _ := got["matching"].(float64); len(calls) != min(100, int(matching)) || matching == 0 {
			t.Errorf("%q: the ready event lists %d calls of %v matching", q, len(calls), got["matching"])
		}
	}
}

// TestInboxOpensWithoutReadingTheListInChromium blocks the page's reads
// of the pending list before it opens: the first page shows all the
// same, from the change stream's first event.
func TestInboxOpensWithoutReadingTheListInChromium(t *testing.T) {
	b := browser(t)
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	fillPending(t, e, 150)
	alice := e.person(t, b, aliceToken)
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 100`)
	blockList(t, alice, e.url)
	do(t, alice, chromedp.Navigate(e.url+"/inbox"))
	waitJS(t, alice, `document.querySelectorAll("#list li").length === 100 && document.getElementById("count").textContent === "150 calls waiting"`)
	if got := eval[string](t, alice, `document.querySelector("#list li").dataset.id`); got != "int_0000" {
		t.Errorf("the first row is %s, want int_0000", got)
	}
	if got := text(t, alice, "#load-error"); got != "" {
		t.Errorf("the page tried to read the list: %s", got)
	}
}

// TestInboxAssetsKeptByTheBrowser: the pages name their scripts and style
// sheet by digest, and a file asked for by its digest is kept for a year;
// asked for otherwise (an old digest, none) it is checked at each use.
func TestInboxAssetsKeptByTheBrowser(t *testing.T) {
	e := newInboxEnv(t, map[string][]toolruntest.Reply{})
	c, _ := e.login(t, aliceToken)
	resp, err := c.Get(e.url + "/inbox")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	refs := regexp.MustCompile(`(?:src|href)="(/inbox/static/[a-z]+\.(?:js|css))\?v=([0-9a-f]+)"`).FindAllStringSubmatch(string(page), -1)
	if len(refs) != 4 {
		t.Fatalf("the page names %d files by digest, want 4 (inbox.css, session.js, validate.js, inbox.js): %s", len(refs), page)
	}
	for _, ref := range refs {
		for _, tt := range []struct{ query, want string }{
			{"?v=" + ref[2], "public, max-age=31536000, immutable"},
			{"?v=0" + ref[2], "no-cache"},
			{"", "no-cache"},
		} {
			resp, err := http.Get(e.url + ref[1] + tt.query)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("Cache-Control"); resp.StatusCode != http.StatusOK || got != tt.want {
				t.Errorf("%s%s: %d, Cache-Control %q, want 200, %q", ref[1], tt.query, resp.StatusCode, got, tt.want)
			}
		}
	}
}
