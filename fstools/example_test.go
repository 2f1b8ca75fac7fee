package fstools_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolrun/toolrun/fstools"
)

func Example() {
	dir, err := os.MkdirTemp("", "fstools-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("buy milk\ncall Ada\n"), 0o644)

	root, err := fstools.Open(dir, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer root.Close()
	tools := root.Tools() // list_files, read_file, grep: pass them to toolrun.New

	// What the runner does with the model's calls:
	for _, call := range []struct{ tool, input string }{
		{"grep", `{"pattern": "Ada"}`},
		{"read_file", `{"path": "../etc/passwd"}`},
	} {
		for _, t := range tools {
			if t.Name() != call.tool {
				continue
			}
			out, err := t.Run(context.Background(), json.RawMessage(call.input))
			if err != nil {
				fmt.Println("error:", err)
				continue
			}
			fmt.Println(out[0].OfText.Text)
		}
	}
	// Output:
	// notes.txt:2: call Ada
	// error: path "../etc/passwd" is outside the working directory; only paths inside it can be read, such as "." or "notes.txt"
}
