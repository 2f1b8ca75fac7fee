package toolrunotel

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNoRootInternalImports checks that no file of this module, its tests
// included, imports an internal package of the root module. This module is
// versioned apart from the root, so the root's internal packages must not
// become a contract between them: what it needs is the root's exported API.
// (go list -deps lists the root's internal packages all the same, as
// dependencies of the root package itself; what matters is that none is
// imported from here.)
func TestNoRootInternalImports(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no Go files found")
	}
	fset := token.NewFileSet()
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				t.Fatal(err)
			}
			if strings.HasPrefix(path, "github.com/toolrun/toolrun/internal/") {
				t.Errorf("%s imports %s, an internal package of the root module", name, path)
			}
		}
	}
}
