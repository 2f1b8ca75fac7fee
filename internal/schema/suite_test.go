package schema

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolrun/toolrun/internal/jsonschema"
)

// suiteDir returns the directory of the official JSON Schema Test Suite
// files that ship inside the github.com/google/jsonschema-go module.
func suiteDir(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/google/jsonschema-go").Output()
	if err != nil {
		t.Fatalf("go list -m github.com/google/jsonschema-go: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "jsonschema", "testdata")
}

// suiteSkips are the test files not run, and why. Every other file of the
// draft2020-12 and draft7 directories runs in full; optional/ is not
// shipped in the module.
var suiteSkips = map[string]string{
	"refRemote.json": "its schemas refer to http://localhost:1234/…, and a tool's schema may not refer outside itself",
}

// suiteCaseSkips are single cases not run, by "file: group / case", and why.
var suiteCaseSkips = map[string]string{}

// suiteCases is how many cases run.
const suiteCases = 1945

type suiteGroup struct {
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Tests       []struct {
		Description string          `json:"description"`
		Data        json.RawMessage `json:"data"`
		Valid       bool            `json:"valid"`
	} `json:"tests"`
}

// TestJSONSchemaTestSuite runs the official JSON Schema Test Suite for
// draft 2020-12 and draft-07 through the same compile and check as a
// tool's schema, without the tool-only rules (an object root, one view of
// the input), which the suite does not know.
func TestJSONSchemaTestSuite(t *testing.T) {
	dir := suiteDir(t)
	drafts := []struct {
		dir   string
		draft *jsonschema.Draft
	}{
		{"draft2020-12", jsonschema.Draft2020},
		{"draft7", jsonschema.Draft7},
	}
	total, passed, skipped := 0, 0, 0
	for _, d := range drafts {
		files, err := filepath.Glob(filepath.Join(dir, d.dir, "*.json"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no suite files in %s: %v", filepath.Join(dir, d.dir), err)
		}
		for _, file := range files {
			base := filepath.Base(file)
			if _, skip := suiteSkips[base]; skip {
				continue
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var groups []suiteGroup
			if err := json.Unmarshal(data, &groups); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			for _, g := range groups {
				s, err := compile(g.Schema, d.draft, false)
				if err != nil && bytes.Contains(g.Schema, []byte("localhost:1234")) && strings.Contains(err.Error(), "references outside the schema are not allowed") {
					// The suite's remote schemas are served from
					// localhost:1234; a tool's schema may not refer outside
					// itself.
					t.Logf("skipped, remote reference: %s/%s: %s (%d cases)", d.dir, base, g.Description, len(g.Tests))
					skipped += len(g.Tests)
					continue
				}
				for _, tc := range g.Tests {
					name := d.dir + "/" + base + ": " + g.Description + " / " + tc.Description
					if _, skip := suiteCaseSkips[name]; skip {
						continue
					}
					total++
					if err != nil {
						t.Errorf("%s: compiling: %v", name, err)
						continue
					}
					dec := json.NewDecoder(bytes.NewReader(tc.Data))
					dec.UseNumber()
					var v any
					if err := dec.Decode(&v); err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					vs, verr := s.check(t.Context(), v)
					if verr != nil {
						t.Errorf("%s: %v", name, verr)
						continue
					}
					if got := len(vs) == 0; got != tc.Valid {
						t.Errorf("%s: got valid %v, want %v (%+v)", name, got, tc.Valid, vs)
						continue
					}
					passed++
				}
			}
		}
	}
	// The count is pinned so that a change that stops cases from running
	// shows; update it (and the README) when the suite files change.
	if total != suiteCases {
		t.Errorf("ran %d cases, want %d", total, suiteCases)
	}
	t.Logf("JSON Schema Test Suite: %d of %d cases pass; %d cases skipped for remote references, and refRemote.json", passed, total, skipped)
}
