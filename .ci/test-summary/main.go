// Command test-summary reads the output of go test -json on stdin and
// prints what go test prints without it: a line per package, and the
// output of each test that failed. It ends with one line that names the
// components whose absence made tests skip, so that a run which passed
// without Chromium, the MCP reference server or a Temporal dev server says
// so rather than passing quietly.
//
// A test that skips for a missing component says, in its skip message,
// "missing component: NAME" followed by ";", " (", or the end of the line;
// tests that skip for other reasons (a helper process, -short) are not
// counted. With CI set, such tests fail instead of skipping, and their
// failures are printed as any other.
//
// It exits with status 1 if a test or a build failed. .ci/test runs it:
//
//	go test -race -json ./... | go run .ci/test-summary/main.go
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of go test -json (cmd/test2json).
type event struct {
	Action     string
	Package    string
	Test       string
	Output     string
	ImportPath string // build-output, build-fail
}

const marker = "missing component: "

func main() {
	failed, err := summarize(os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "test-summary:", err)
		os.Exit(2)
	}
	if failed {
		os.Exit(1)
	}
}

// test is what a test printed, kept until the top-level test it belongs
// to ends.
type test struct {
	result   string   // its "--- FAIL: …" line, say
	logs     []string // what it logged, and the rest of its output
	children []string // its subtests, in the order they ran
}

// summarize copies the report of in to out and reports whether anything
// failed.
func summarize(in io.Reader, out io.Writer) (failed bool, err error) {
	tests := map[string]*test{} // by package and name
	missing := map[string]int{} // component → tests skipped for it
	get := func(pkg, name string) *test {
		k := pkg + " " + name
		if tests[k] == nil {
			tests[k] = &test{}
		}
		return tests[k]
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if json.Unmarshal(line, &e) != nil || e.Action == "" {
			fmt.Fprintf(out, "%s\n", line) // not an event: go test's own words, such as a setup failure
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "build-fail":
			failed = true
		case e.Test == "" && e.Action == "output":
			if e.Output != "PASS\n" && !strings.HasPrefix(e.Output, "=== ") {
				fmt.Fprint(out, e.Output)
			}
		case e.Test == "" && e.Action == "fail":
			failed = true
		case e.Action == "run":
			if i := strings.LastIndex(e.Test, "/"); i >= 0 {
				parent := get(e.Package, e.Test[:i])
				parent.children = append(parent.children, e.Test)
			}
		case e.Action == "output":
			t := get(e.Package, e.Test)
			switch trimmed := strings.TrimLeft(e.Output, " "); {
			case strings.HasPrefix(trimmed, "--- "):
				t.result = trimmed
			case strings.HasPrefix(trimmed, "=== "):
			default:
				t.logs = append(t.logs, e.Output)
			}
		case e.Action == "skip" || e.Action == "pass" || e.Action == "fail":
			if e.Action == "skip" {
				if name, ok := component(get(e.Package, e.Test)); ok {
					missing[name]++
				}
			}
			if e.Test != top {
				continue
			}
			if e.Action == "fail" {
				failed = true
				printFailure(out, tests, e.Package, top, 0)
			}
			for k := range tests { // the test and its subtests are done
				if k == e.Package+" "+top || strings.HasPrefix(k, e.Package+" "+top+"/") {
					delete(tests, k)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return failed, err
	}
	fmt.Fprintln(out, missingLine(missing))
	return failed, nil
}

// component returns the component named by the skip message of t, if it
// skipped for one.
func component(t *test) (string, bool) {
	s := strings.Join(t.logs, "")
	i := strings.Index(s, marker)
	if i < 0 {
		return "", false
	}
	name := s[i+len(marker):]
	for _, end := range []string{"\n", "; ", " ("} {
		if j := strings.Index(name, end); j >= 0 {
			name = name[:j]
		}
	}
	name = strings.TrimSpace(name)
	return name, name != ""
}

// printFailure prints a failed test as go test does without -json: its
// result line, what it logged, then its failed subtests, each level
// indented by four spaces more.
func printFailure(out io.Writer, tests map[string]*test, pkg, name string, depth int) {
	t := tests[pkg+" "+name]
	if t == nil || !strings.HasPrefix(t.result, "--- FAIL") {
		return
	}
	indent := strings.Repeat("    ", depth)
	fmt.Fprint(out, indent+t.result)
	for _, l := range t.logs {
		fmt.Fprint(out, indent+l)
	}
	for _, c := range t.children {
		printFailure(out, tests, pkg, c, depth+1)
	}
}

// missingLine says which components were missing, and for how many tests.
func missingLine(missing map[string]int) string {
	if len(missing) == 0 {
		return "no test skipped for a missing component"
	}
	names := make([]string, 0, len(missing))
	for n := range missing {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, n := range names {
		tests := "tests"
		if missing[n] == 1 {
			tests = "test"
		}
		parts[i] = fmt.Sprintf("%s (%d %s)", n, missing[n], tests)
	}
	return "skipped, missing: " + strings.Join(parts, ", ") + "; with CI set, these fail instead"
}
