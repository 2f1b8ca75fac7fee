// Command mkproxy writes a Go module proxy, as a directory for
// GOPROXY=file://DIR, that serves the modules of this checkout at one
// version: the outside-consumer test (.ci/consumer.sh) installs from it the
// way a user would from proxy.golang.org once the version is tagged.
//
// Usage:
//
//	mkproxy -repo DIR -version vX.Y.Z -o PROXYDIR module-dir...
//
// Each module-dir is relative to -repo; its go.mod names the module. The
// zips are made with golang.org/x/mod/zip, as the go command makes them,
// so a nested module is left out of the module that holds its directory.
//
// A module's files are the ones git would release: those "git ls-files
// --cached --others --exclude-standard" lists (committed, or new and not
// ignored), so what the checkout installs for its tests (node_modules of
// the npm clients, hundreds of megabytes, ignored by .gitignore) is left
// out as it is from a tag, and an edit not yet committed is still tested.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the checkout's root `dir`")
	version := flag.String("version", "", "the `version` to serve the modules at, such as v0.1.0")
	out := flag.String("o", "", "the proxy `dir` to write")
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: mkproxy -repo DIR -version vX.Y.Z -o PROXYDIR module-dir...")
		os.Exit(2)
	}
	for _, dir := range flag.Args() {
		path, err := write(filepath.Join(*repo, dir), *version, *out)
		if err != nil {
			fmt.Fprintf(os.Stderr, "mkproxy: %s: %v\n", dir, err)
			os.Exit(1)
		}
		fmt.Printf("%s@%s\n", path, *version)
	}
}

// write adds the module in dir to the proxy at out, at version, and
// returns its path.
func write(dir, version, out string) (string, error) {
	gomod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return "", err
	}
	f, err := modfile.ParseLax("go.mod", gomod, nil)
	if err != nil {
		return "", err
	}
	mv := module.Version{Path: f.Module.Mod.Path, Version: version}
	if err := module.Check(mv.Path, mv.Version); err != nil {
		return "", err
	}
	esc, err := module.EscapePath(mv.Path)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}
	z, err := os.Create(filepath.Join(vdir, version+".zip"))
	if err != nil {
		return "", err
	}
	files, err := gitFiles(dir)
	if err != nil {
		z.Close()
		return "", err
	}
	if err := zip.Create(z, mv, files); err != nil {
		z.Close()
		return "", err
	}
	if err := z.Close(); err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(vdir, version+".mod"), gomod, 0o644); err != nil {
		return "", err
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, time.Now().UTC().Truncate(time.Second)})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(vdir, version+".info"), info, 0o644); err != nil {
		return "", err
	}
	return mv.Path, os.WriteFile(filepath.Join(vdir, "list"), []byte(version+"\n"), 0o644)
}

// gitFiles lists the files of the module in dir as git would release
// them: tracked or untracked but not ignored, still present on disk, and
// outside any nested module (a directory below dir with a go.mod of its
// own).
func gitFiles(dir string) ([]zip.File, error) {
	cmd := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	var names []string
	nested := map[string]bool{}
	for _, name := range strings.Split(string(out), "\x00") {
		if name == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(name))); err != nil {
			continue // deleted in the work tree, not yet committed
		}
		if path.Base(name) == "go.mod" && name != "go.mod" {
			nested[path.Dir(name)] = true
		}
		names = append(names, name)
	}
	var files []zip.File
	for _, name := range names {
		if inNested(name, nested) {
			continue
		}
		files = append(files, file{root: dir, name: name})
	}
	return files, nil
}

// inNested reports whether name lies in one of the nested module
// directories.
func inNested(name string, nested map[string]bool) bool {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if nested[d] {
			return true
		}
	}
	return false
}

// file is one file of a module zip, read from the checkout.
type file struct{ root, name string }

func (f file) Path() string { return f.name }
func (f file) Lstat() (os.FileInfo, error) {
	return os.Lstat(filepath.Join(f.root, filepath.FromSlash(f.name)))
}
func (f file) Open() (io.ReadCloser, error) {
	return os.Open(filepath.Join(f.root, filepath.FromSlash(f.name)))
}
