package toolrun_test

// The Go code of the documentation is compiled here, so that a reader who
// copies a block gets code that builds, and a renamed identifier breaks
// this test rather than the reader's program.
//
// Where the blocks are: the ```go fences of README.md and docs/*.md, and
// the code blocks of the package comment in doc.go (a block of
// box-drawing characters there is a diagram, not Go). How each is read:
//
//   - A fence preceded by the line <!-- file: PATH --> must equal the file
//     PATH of the repository byte for byte; the file itself is built and
//     run by its own package's tests.
//   - A fence preceded by <!-- excerpt: PATH --> must be a run of
//     consecutive lines of PATH, compared with leading white space removed.
//   - A block that starts with "package" is a whole file, and must compile
//     as it is, with every import it uses and nothing unused.
//   - A block whose code (after any leading // comments) starts with
//     "func" or "import" is top-level code of package main.
//   - Any other block is the body of a function that returns an error.
//
// Blocks that are not whole files are checked with the imports of
// docImports (each by its last path element, anthropic for the SDK) and
// may use the package-level variables of docPreamble without declaring
// them; a variable or import a fragment leaves unused is no error.
//
// Inline code spans that name a Go identifier with a dot, such as
// `Options.Timeouts.StreamIdle` or `mcptool.DefaultEnv`, must name one
// that exists: a package of docImports, or package toolrun when the first
// part is one of its exported names, then fields and methods.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/doc/comment"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/google/go-cmp/cmp"
	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/toolruntest"
)

// docImports are the packages a fragment may use without importing them.
var docImports = []string{
	"context",
	"crypto/hmac",
	"crypto/sha256",
	"encoding/hex",
	"database/sql",
	"encoding/json",
	"errors",
	"fmt",
	"io",
	"log",
	"log/slog",
	"net/http",
	"os",
	"strings",
	"testing",
	"time",
	"github.com/anthropics/anthropic-sdk-go/v2",
	"github.com/toolrun/toolrun",
	"github.com/toolrun/toolrun/driver",
	"github.com/toolrun/toolrun/filestore",
	"github.com/toolrun/toolrun/fstools",
	"github.com/toolrun/toolrun/mcptool",
	"github.com/toolrun/toolrun/policy",
	"github.com/toolrun/toolrun/pricing",
	"github.com/toolrun/toolrun/redact",
	"github.com/toolrun/toolrun/serve",
	"github.com/toolrun/toolrun/storetest",
	"github.com/toolrun/toolrun/toolruntest",
	"github.com/toolrun/toolrun/transcript",
	"github.com/toolrun/toolrun/toolrunotel", // a module of its own: go.work brings it in
}

// docPreamble declares what a fragment may use without declaring it: the
// context, client, params, tools, options, store and runner that the
// text around a fragment speaks of.
const docPreamble = `
var (
	ctx    context.Context
	client anthropic.Client
	params anthropic.BetaMessageNewParams
	tools  []toolrun.Tool
	opts   *toolrun.Options
	store  toolrun.Store
	r      *toolrun.Runner

	weather *toolrun.FuncTool // doc.go's "Running" uses the tool of its "Tools"
)
`

// docFiles returns the documents whose Go blocks are checked.
func docFiles(t *testing.T) []string {
	t.Helper()
	md, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md", "doc.go"}, md...)
}

func TestDocGoBlocks(t *testing.T) {
	imp := docImporter(t)
	n := 0
	for _, file := range docFiles(t) {
		blocks, err := goBlocks(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			n++
			if err := b.check(imp); err != nil {
				t.Errorf("%s:%d: %v", b.file, b.line, err)
			}
		}
	}
	if n < 10 {
		t.Errorf("found %d Go blocks in %v; want the README's and doc.go's, at least 10", n, docFiles(t))
	}
}

// TestDocGoBlocksCheck makes sure the check above can fail: each of these
// blocks is wrong in a way a reader would trip on.
func TestDocGoBlocksCheck(t *testing.T) {
	imp := docImporter(t)
	tests := []struct {
		name string
		b    block
		want string // in the error
	}{
		{"undeclared err", block{src: "res, _ := r.Run(ctx)\nres, err = r.Run(ctx)\n"}, "undefined: err"},
		{"stale field", block{src: "_ = toolrun.Options{StreamIdleTimeout: time.Second}\n"}, "unknown field StreamIdleTimeout"},
		{"whole file with an unused import", block{src: "package main\n\nimport \"fmt\"\n\nfunc main() {}\n"}, `"fmt" imported and not used`},
		{"file that differs", block{directive: "file", path: "examples/quickstart/main.go", src: "package main\n"}, "differs from examples/quickstart/main.go"},
		{"excerpt not in the file", block{directive: "excerpt", path: "examples/approval/main.go", src: "r.Decide(\"x\", toolrun.Decision{})\n"}, "not an excerpt of examples/approval/main.go"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.b.file, tt.b.line = "test.md", 1
			err := tt.b.check(imp)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("check = %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// spanRE finds an inline code span that looks like a dotted Go name.
var spanRE = regexp.MustCompile("`((?:[a-z]+\\.)?[A-Z][A-Za-z0-9]*(?:\\.[A-Z][A-Za-z0-9]*)*)(?:\\(\\))?`")

func TestDocNamesExist(t *testing.T) {
	imp := docImporter(t)
	pkgs := map[string]*types.Package{}
	for _, path := range docImports {
		if !strings.Contains(path, ".") { // the standard library is not spoken of this way
			continue
		}
		p, err := imp.Import(path)
		if err != nil {
			t.Fatal(err)
		}
		pkgs[p.Name()] = p
	}
	root := pkgs["toolrun"]
	for _, file := range docFiles(t) {
		if !strings.HasSuffix(file, ".md") {
			continue
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			for _, m := range spanRE.FindAllStringSubmatch(line, -1) {
				parts := strings.Split(m[1], ".")
				pkg := root
				if p, ok := pkgs[parts[0]]; ok {
					pkg, parts = p, parts[1:]
				} else if len(parts) < 2 || root.Scope().Lookup(parts[0]) == nil {
					continue // not a name of ours: an environment variable, a type of the SDK
				}
				if err := lookupName(pkg, parts); err != nil {
					t.Errorf("%s:%d: `%s`: %v", file, i+1, m[1], err)
				}
			}
		}
	}
}

// lookupName resolves parts (a package-level name, then fields and
// methods) in pkg.
func lookupName(pkg *types.Package, parts []string) error {
	obj := pkg.Scope().Lookup(parts[0])
	if obj == nil {
		return fmt.Errorf("%s.%s does not exist", pkg.Name(), parts[0])
	}
	typ := obj.Type()
	for _, name := range parts[1:] {
		o, _, _ := types.LookupFieldOrMethod(typ, true, pkg, name)
		if o == nil {
			return fmt.Errorf("%s has no field or method %s", typ, name)
		}
		typ = o.Type()
	}
	return nil
}

// block is one Go code block of a document.
type block struct {
	file      string
	line      int    // of the block's first line of code
	directive string // "file", "excerpt" or ""
	path      string // the directive's file
	src       string
}

var directiveRE = regexp.MustCompile(`^<!-- (file|excerpt): (\S+) -->$`)

// goBlocks returns the Go blocks of a Markdown file or of a Go file's
// package comment.
func goBlocks(file string) ([]block, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	if strings.HasSuffix(file, ".go") {
		return docCommentBlocks(file, b)
	}
	var blocks []block
	var cur *block
	prev := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &block{file: file, line: n + 1}
			if m := directiveRE.FindStringSubmatch(strings.TrimSpace(prev)); m != nil {
				cur.directive, cur.path = m[1], m[2]
			}
		case cur != nil && strings.TrimSpace(line) == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.src += line + "\n"
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: a ```go block is not closed", file, cur.line-1)
	}
	return blocks, sc.Err()
}

func docCommentBlocks(file string, src []byte) ([]block, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		return nil, err
	}
	if f.Doc == nil {
		return nil, nil
	}
	var p comment.Parser
	d := p.Parse(f.Doc.Text())
	var blocks []block
	for _, c := range d.Content {
		code, ok := c.(*comment.Code)
		if !ok || strings.ContainsFunc(code.Text, func(r rune) bool { return r >= 0x2500 && r <= 0x257f }) {
			continue
		}
		// The line of the block in the file: its first line, found in the comment.
		first, _, _ := strings.Cut(code.Text, "\n")
		line := fset.Position(f.Doc.Pos()).Line
		for i, l := range strings.Split(string(src), "\n") {
			if strings.TrimSpace(strings.TrimPrefix(l, "//")) == strings.TrimSpace(first) {
				line = i + 1
				break
			}
		}
		blocks = append(blocks, block{file: file, line: line, src: code.Text})
	}
	return blocks, nil
}

// check reports what is wrong with b.
func (b block) check(imp types.Importer) error {
	switch b.directive {
	case "file":
		want, err := os.ReadFile(b.path)
		if err != nil {
			return err
		}
		if b.src != string(want) {
			return fmt.Errorf("the block differs from %s: copy the file into it", b.path)
		}
		return nil
	case "excerpt":
		whole, err := os.ReadFile(b.path)
		if err != nil {
			return err
		}
		if !isExcerpt(trimLines(b.src), trimLines(string(whole))) {
			return fmt.Errorf("the block is not an excerpt of %s: copy the lines from it", b.path)
		}
		return nil
	}
	src, whole := b.program()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "block.go", src, parser.SkipObjectResolution)
	if err != nil {
		return err
	}
	var errs []error
	conf := types.Config{Importer: imp, Error: func(err error) {
		if te, ok := err.(types.Error); ok && te.Soft && !whole {
			return // a fragment may leave a name unused
		}
		errs = append(errs, err)
	}}
	conf.Check("main", fset, []*ast.File{f}, nil)
	return errors.Join(errs...)
}

// program returns b as a Go file, and whether b was a whole file.
func (b block) program() (string, bool) {
	code := strings.TrimLeft(b.src, "\n")
	if strings.HasPrefix(code, "package ") {
		return fmt.Sprintf("//line %s:%d\n%s", b.file, b.line, code), true
	}
	var s strings.Builder
	s.WriteString("package main\n\nimport (\n")
	for _, p := range docImports {
		// The preamble's packages, and those the block names, so that a
		// package of another module is loaded only for the blocks that use it.
		name := path.Base(strings.TrimSuffix(p, "/v2"))
		if name == "v2" || strings.HasSuffix(p, "/v2") {
			name = "anthropic"
		}
		if name == "context" || name == "anthropic" || name == "toolrun" || regexp.MustCompile(`\b`+name+`\.`).MatchString(code) {
			fmt.Fprintf(&s, "\t%q\n", p)
		}
	}
	s.WriteString(")\n" + docPreamble)
	first := code
	for strings.HasPrefix(first, "//") { // a comment before the code says nothing of its kind
		_, first, _ = strings.Cut(first, "\n")
	}
	top := strings.HasPrefix(first, "func ") || strings.HasPrefix(first, "import")
	if top {
		fmt.Fprintf(&s, "\n//line %s:%d\n%s", b.file, b.line, code)
		return s.String(), false
	}
	fmt.Fprintf(&s, "\nfunc _() error {\n//line %s:%d\n%s\nreturn nil\n}\n", b.file, b.line, code)
	return s.String(), false
}

func trimLines(s string) []string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	return lines
}

// isExcerpt reports whether part is a run of consecutive lines of whole.
func isExcerpt(part, whole []string) bool {
	for i := range whole {
		if len(whole)-i >= len(part) && slices.Equal(whole[i:i+len(part)], part) {
			return true
		}
	}
	return false
}

var (
	docImporterOnce sync.Once
	docImporterVal  types.Importer
	docImporterErr  error
)

// docImporter returns an importer of docImports and their dependencies,
// read from the export data the go command builds.
func docImporter(t *testing.T) types.Importer {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the export data of the documented packages")
	}
	docImporterOnce.Do(func() {
		gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
		cmd := exec.Command(gobin, append([]string{"list", "-e", "-export", "-deps", "-json=ImportPath,Export,Error"}, docImports...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			docImporterErr = fmt.Errorf("go list: %v\n%s", err, stderr.Bytes())
			return
		}
		exports, failed := map[string]string{}, map[string]string{}
		dec := json.NewDecoder(bytes.NewReader(out))
		for {
			var p struct {
				ImportPath, Export string
				Error              *struct{ Err string }
			}
			if err := dec.Decode(&p); err == io.EOF {
				break
			} else if err != nil {
				docImporterErr = err
				return
			}
			if p.Error != nil {
				failed[p.ImportPath] = p.Error.Err
				continue
			}
			exports[p.ImportPath] = p.Export
		}
		fset := token.NewFileSet()
		docImporterVal = importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
			f, ok := exports[path]
			if msg, ok := failed[path]; ok {
				return nil, fmt.Errorf("go list %s: %s", path, msg)
			}
			if !ok || f == "" {
				return nil, fmt.Errorf("no export data for %q: add it to docImports", path)
			}
			return os.Open(f)
		})
	})
	if docImporterErr != nil {
		t.Fatal(docImporterErr)
	}
	return docImporterVal
}

// TestTestSummary runs the filter of the README's test command (.ci/test)
// on the go test -json output of a module whose tests pass, fail, skip for
// a missing component and skip for another reason, and checks what it
// prints and its exit status.
func TestTestSummary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs go test")
	}
	gobin := filepath.Join(runtime.GOROOT(), "bin", "go")
	dir := t.TempDir()
	summary := filepath.Join(dir, "test-summary")
	if out, err := exec.Command(gobin, "build", "-o", summary, filepath.Join(".ci", "test-summary", "main.go")).CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	mod := filepath.Join(dir, "m")
	files := map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.26\n",
		"a/a_test.go": `package a

import "testing"

func TestPass(t *testing.T) {}
func TestWidget(t *testing.T) { t.Skip("missing component: widget (install it with: make widget); skipping") }
func TestGadget(t *testing.T) {
	t.Run("one", func(t *testing.T) { t.Skip("missing component: gadget server; none at :1") })
	t.Run("two", func(t *testing.T) { t.Skip("missing component: gadget server; none at :1") })
}
func TestHelper(t *testing.T) { t.Skip("a helper process") }
`,
		"b/b_test.go": `package b

import "testing"

func TestBroken(t *testing.T) {
	t.Run("sub", func(t *testing.T) { t.Error("got 1, want 2") })
}
`,
	}
	for name, src := range files {
		p := filepath.Join(mod, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name       string
		pkgs       string
		wantStatus int
		want       []string // in the output, in this order
		wantNot    []string
	}{
		{"skips", "./a", 0, []string{"ok  \texample.com/m/a", "skipped, missing: gadget server (2 tests), widget (1 test); with CI set, these fail instead\n"},
			[]string{"=== RUN", "a helper process", "--- SKIP"}},
		{"a failure", "./...", 1, []string{"--- FAIL: TestBroken", "--- FAIL: TestBroken/sub", "got 1, want 2", "FAIL\texample.com/m/b", "skipped, missing: gadget server (2 tests), widget (1 test)"},
			[]string{"=== RUN"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gotest := exec.Command(gobin, "test", "-json", tt.pkgs)
			gotest.Dir = mod
			gotest.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
			raw, _ := gotest.Output() // b fails: its status is the filter's to report
			cmd := exec.Command(summary)
			cmd.Stdin = bytes.NewReader(raw)
			out, err := cmd.Output()
			status := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				status = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if status != tt.wantStatus {
				t.Errorf("exit status %d, want %d\n%s", status, tt.wantStatus, out)
			}
			rest := string(out)
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q after what came before:\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
			for _, w := range tt.wantNot {
				if strings.Contains(string(out), w) {
					t.Errorf("output has %q:\n%s", w, out)
				}
			}
		})
	}
}

// TestReadmeContinueChat checks what the README's "Continuing a chat" says:
// after a run has finished, appending the user's next message and running
// again sends the whole conversation and returns the new answer.
func TestReadmeContinueChat(t *testing.T) {
	s := toolruntest.New(t, toolruntest.Script(
		toolruntest.Message(toolruntest.Text("Sunny today.")),
		toolruntest.Message(toolruntest.Text("Rain tomorrow.")),
	))
	r := toolrun.New(client(s), userParams("Weather in Paris?"), nil, &toolrun.Options{Logger: discard()})
	res, err := r.Run(t.Context())
	if err != nil || res.Text() != "Sunny today." {
		t.Fatalf("first Run: %q, %v; want %q", res.Text(), err, "Sunny today.")
	}
	r.AppendMessages(anthropic.NewBetaUserMessage(anthropic.NewBetaTextBlock("And tomorrow?")))
	res, err = r.Run(t.Context())
	if err != nil || res.Text() != "Rain tomorrow." {
		t.Fatalf("second Run: %q, %v; want %q", res.Text(), err, "Rain tomorrow.")
	}
	reqs := s.Requests()
	var said []string
	for _, m := range reqs[len(reqs)-1].Conversation {
		for _, b := range m.Content {
			said = append(said, m.Role+": "+b.Text)
		}
	}
	want := []string{"user: Weather in Paris?", "assistant: Sunny today.", "user: And tomorrow?"}
	if diff := cmp.Diff(want, said); diff != "" {
		t.Errorf("the second request's conversation (-want +got):\n%s", diff)
	}
}
