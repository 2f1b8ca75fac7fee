package transcript_test

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/transcript"
)

// TestReportOfDeepInput: a transcript whose tool_use input is nested
// thousands deep (a hostile or broken one) is reported with the input as
// it is, cut to what the report shows, rather than indented first: the
// indented form grows with the square of the depth, hundreds of megabytes
// and seconds for each such block. A shallow input is still indented.
func TestReportOfDeepInput(t *testing.T) {
	golden, err := os.ReadFile("testdata/run.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	header, _, _ := strings.Cut(string(golden), "\n")
	const depth = 5000
	deep := strings.Repeat("[", depth) + strings.Repeat("]", depth)
	text := header + "\n" +
		`{"type":"response","time":"2025-06-01T12:00:00.02Z","turn":1,"body":{"content":[` +
		`{"type":"tool_use","id":"a","name":"deep","input":{"x":` + deep + `}},` +
		`{"type":"tool_use","id":"b","name":"shallow","input":{"city":"Paris"}}]}}` + "\n"
	tr, err := transcript.Read(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	var page bytes.Buffer
	if err := transcript.WriteHTML(&page, tr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), strings.Repeat("[", 100)) {
		t.Error("the report does not show the deep input as it is")
	}
	if strings.Contains(page.String(), strings.Repeat(" ", 300)) {
		t.Error("the report shows the deep input indented")
	}
	if !strings.Contains(page.String(), "{\n  &#34;city&#34;: &#34;Paris&#34;\n}") {
		t.Error("the report does not show the shallow input indented")
	}
}
