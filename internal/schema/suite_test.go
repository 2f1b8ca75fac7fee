package schema

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/internal/jsonschema"
)

var update = flag.Bool("update", false, "rewrite CONFORMANCE.md from the suite's results")

// suiteRoot returns the official JSON Schema Test Suite's directory, laid
// beside the repository at ../shared/jsonschema-test-suite. Without it the
// test skips, and fails when CI is set.
func suiteRoot(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "..", "..", "shared", "jsonschema-test-suite"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "tests")); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the JSON Schema Test Suite is missing: %v", err)
		}
		t.Skipf("the JSON Schema Test Suite is not at %s (CI fails here): %v", dir, err)
	}
	return dir
}

// suiteDrafts are the drafts toolrun advertises, by their directory in the
// suite.
var suiteDrafts = []struct {
	dir, name string
	draft     *jsonschema.Draft
}{
	{"draft4", "draft-04", jsonschema.Draft4},
	{"draft6", "draft-06", jsonschema.Draft6},
	{"draft7", "draft-07", jsonschema.Draft7},
	{"draft2019-09", "2019-09", jsonschema.Draft2019},
	{"draft2020-12", "2020-12", jsonschema.Draft2020},
}

// suiteSkips are the files of optional/ not run, and why. Every file of
// each draft's own directory runs in full.
var suiteSkips = map[string]string{
	"format":                "format is an annotation for toolrun in every draft (the API's own tool schemas treat it so), while these cases assert it",
	"format-assertion.json": "the same: these cases need format asserted through a custom metaschema's vocabulary",
}

// suiteKnownFailures are the files of optional/ whose failing cases are
// accepted, and why; a failure in any other file fails the test.
var suiteKnownFailures = map[string]string{
	"content.json":              "contentEncoding, contentMediaType and contentSchema are annotations for toolrun, as 2019-09 and later define them; draft-07 lets a validator assert them, and these cases expect it",
	"zeroTerminatedFloats.json": "draft-04 alone says 1.0 is not an integer; toolrun, as every later draft, takes it as one (a model may write 3.0 for 3)",
}

// suiteRemotes serves the suite's remotes/ at http://localhost:1234/, the
// address its schemas refer to, from the files: no network.
type suiteRemotes string

func (dir suiteRemotes) Load(url string) (any, error) {
	rest, ok := strings.CutPrefix(url, "http://localhost:1234/")
	if !ok {
		return nil, fmt.Errorf("the suite serves no %s", url)
	}
	f, err := os.Open(filepath.Join(string(dir), filepath.FromSlash(rest)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return jsonschema.UnmarshalJSON(f)
}

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// suiteCount counts the cases of one draft's directory or its optional/.
type suiteCount struct{ passed, failed, skipped int }

// TestJSONSchemaTestSuite runs the official JSON Schema Test Suite for
// every draft toolrun advertises, refRemote included (served from the
// suite's remotes/), through the same compile and check as a tool's
// schema, without the tool-only rules (an object root, no reference
// outside the schema, one view of the input), which the suite does not
// know. Every case of each draft's directory must pass; optional/ runs
// too, and its failures are listed in CONFORMANCE.md. With -update it
// rewrites CONFORMANCE.md; otherwise the file must match the results.
func TestJSONSchemaTestSuite(t *testing.T) {
	root := suiteRoot(t)
	loader := suiteRemotes(filepath.Join(root, "remotes"))
	var report bytes.Buffer
	type row struct {
		name               string
		required, optional suiteCount
		optionalFailures   []string
	}
	var rows []row
	for _, d := range suiteDrafts {
		r := row{name: d.name}
		for _, optional := range []bool{false, true} {
			dir := filepath.Join(root, "tests", d.dir)
			if optional {
				dir = filepath.Join(dir, "optional")
			}
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			count := &r.required
			if optional {
				count = &r.optional
			}
			for _, e := range entries {
				name := e.Name()
				if optional {
					if _, skip := suiteSkips[name]; skip {
						n, err := countCases(filepath.Join(dir, name))
						if err != nil {
							t.Fatal(err)
						}
						count.skipped += n
						continue
					}
				}
				if e.IsDir() || !strings.HasSuffix(name, ".json") {
					continue
				}
				failures := runSuiteFile(t, filepath.Join(dir, name), d.draft, loader, count)
				rel := d.dir + "/" + name
				if optional {
					rel = d.dir + "/optional/" + name
				}
				if _, known := suiteKnownFailures[name]; optional && !known {
					for _, f := range failures {
						t.Errorf("%s: %s (an optional case, in no file of suiteKnownFailures)", rel, f)
					}
				}
				for _, f := range failures {
					if optional {
						r.optionalFailures = append(r.optionalFailures, rel+": "+f)
					} else {
						t.Errorf("%s: %s", rel, f)
					}
				}
			}
		}
		rows = append(rows, r)
	}

	fmt.Fprintf(&report, `# JSON Schema Test Suite conformance

Generated by `+"`go test ./internal/schema -run TestJSONSchemaTestSuite -update`"+`
from the official JSON Schema Test Suite at ../shared/jsonschema-test-suite
(see its README for the commit). The test fails when the results differ from
this file, and when a case of a draft's own directory fails. refRemote and
the other cases that load http://localhost:1234/ are served from the suite's
remotes/ by a local loader.

| draft | required: passed | failed | optional: passed | failed | skipped |
| --- | --- | --- | --- | --- | --- |
`)
	for _, r := range rows {
		fmt.Fprintf(&report, "| %s | %d | %d | %d | %d | %d |\n", r.name, r.required.passed, r.required.failed,
			r.optional.passed, r.optional.failed, r.optional.skipped)
	}
	report.WriteString("\n## Skipped (optional/)\n\n")
	for _, k := range slices.Sorted(mapKeys(suiteSkips)) {
		fmt.Fprintf(&report, "- `%s`: %s.\n", k, suiteSkips[k])
	}
	report.WriteString("\n## Optional cases that fail\n\nAccepted, by file:\n\n")
	for _, k := range slices.Sorted(mapKeys(suiteKnownFailures)) {
		fmt.Fprintf(&report, "- `%s`: %s.\n", k, suiteKnownFailures[k])
	}
	for _, r := range rows {
		fmt.Fprintf(&report, "\n### %s\n\n", r.name)
		if len(r.optionalFailures) == 0 {
			report.WriteString("None.\n")
		}
		for _, f := range r.optionalFailures {
			fmt.Fprintf(&report, "- %s\n", f)
		}
	}
	const file = "CONFORMANCE.md"
	if *update {
		if err := os.WriteFile(file, report.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, report.Bytes()) {
		t.Errorf("%s differs from the suite's results; run go test ./internal/schema -run TestJSONSchemaTestSuite -update and review the diff. Results:\n%s", file, report.Bytes())
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// countCases counts the cases of a suite file, or of every file under a
// directory.
func countCases(path string) (int, error) {
	files := []string{path}
	if fi, err := os.Stat(path); err != nil {
		return 0, err
	} else if fi.IsDir() {
		files, _ = filepath.Glob(filepath.Join(path, "*.json"))
	}
	n := 0
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return 0, err
		}
		var groups []suiteGroup
		if err := json.Unmarshal(data, &groups); err != nil {
			return 0, fmt.Errorf("%s: %w", f, err)
		}
		for _, g := range groups {
			n += len(g.Tests)
		}
	}
	return n, nil
}

// runSuiteFile runs the cases of one suite file, counts them, and returns
// a line for each case that failed.
func runSuiteFile(t *testing.T, file string, draft *jsonschema.Draft, loader jsonschema.URLLoader, count *suiteCount) []string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var groups []suiteGroup
	if err := json.Unmarshal(data, &groups); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var failures []string
	for _, g := range groups {
		s, cerr := compile(g.Schema, draft, false, loader)
		for _, tc := range g.Tests {
			name := g.Description + " / " + tc.Description
			if cerr != nil {
				count.failed++
				failures = append(failures, fmt.Sprintf("%s: compiling: %s", name, oneLine(cerr.Error(), 200)))
				continue
			}
			dec := json.NewDecoder(bytes.NewReader(tc.Data))
			dec.UseNumber()
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("%s: %s: %v", file, name, err)
			}
			vs, verr := s.check(t.Context(), v)
			switch {
			case verr != nil:
				count.failed++
				failures = append(failures, fmt.Sprintf("%s: %s", name, oneLine(verr.Error(), 200)))
			case (len(vs) == 0) != tc.Valid:
				count.failed++
				failures = append(failures, fmt.Sprintf("%s: got valid %v, want %v", name, len(vs) == 0, tc.Valid))
			default:
				count.passed++
			}
		}
	}
	return failures
}
