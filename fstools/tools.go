package fstools

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

type listIn struct {
	Path      string `json:"path,omitempty" jsonschema:"the directory to list, relative to the working directory; empty or . for the working directory itself"`
	Recursive bool   `json:"recursive,omitempty" jsonschema:"list everything under the directory, not only its own entries"`
}

type readIn struct {
	Path   string `json:"path" jsonschema:"the file to read, relative to the working directory"`
	Offset int    `json:"offset,omitempty" jsonschema:"the first line to read, counting from 1; default 1"`
	Limit  int    `json:"limit,omitempty" jsonschema:"the most lines to read; the result says where it stopped if the file goes on"`
}

type grepIn struct {
	Pattern    string `json:"pattern" jsonschema:"the regular expression to look for in each line, in Go RE2 syntax"`
	Path       string `json:"path,omitempty" jsonschema:"the file or directory to search, relative to the working directory; empty for all of it"`
	Glob       string `json:"glob,omitempty" jsonschema:"search only the files whose name matches this glob, such as *.go"`
	IgnoreCase bool   `json:"ignore_case,omitempty" jsonschema:"match regardless of case"`
}

// entry returns the line of list_files for the entry at p.
func (r *Root) entry(p string, d fs.DirEntry) string {
	name := display(p)
	switch t := d.Type(); {
	case t.IsDir():
		return name + "/"
	case t&fs.ModeSymlink != 0:
		target, err := r.root.Readlink(p)
		if err != nil {
			return name + " (symbolic link)"
		}
		return fmt.Sprintf("%s -> %s (symbolic link)", name, target)
	case t.IsRegular():
		if fi, err := d.Info(); err == nil {
			return fmt.Sprintf("%s (%d bytes)", name, fi.Size())
		}
		return name
	}
	return name + " (special file)"
}

func (r *Root) listFiles(ctx context.Context, in listIn) (string, error) {
	rel, err := r.resolve(in.Path)
	if err != nil {
		return "", err
	}
	fi, err := r.root.Stat(rel)
	if err != nil {
		return "", r.pathError(in.Path, err)
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%q is a file, not a directory; read it with read_file", in.Path)
	}
	var lines []string
	stopped := false
	if in.Recursive {
		var unreadable []string
		err = fs.WalkDir(r.root.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == filepath.ToSlash(rel) {
					return err
				}
				unreadable = append(unreadable, display(p))
				return nil
			}
			if p == filepath.ToSlash(rel) {
				return nil
			}
			if err := ctx.Err(); err != nil {
				return err
			}
			if len(lines) == r.opts.MaxEntries {
				stopped = true
				return fs.SkipAll
			}
			lines = append(lines, r.entry(filepath.FromSlash(p), d))
			return nil
		})
		if err != nil {
			return "", r.pathError(in.Path, err)
		}
		if len(unreadable) > 0 {
			lines = append(lines, fmt.Sprintf("[list_files: could not read %s]", strings.Join(unreadable, ", ")))
		}
	} else {
		f, err := r.root.Open(rel)
		if err != nil {
			return "", r.pathError(in.Path, err)
		}
		entries, err := f.ReadDir(-1)
		f.Close()
		if err != nil {
			return "", r.pathError(in.Path, err)
		}
		slices.SortFunc(entries, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
		for _, d := range entries {
			if len(lines) == r.opts.MaxEntries {
				stopped = true
				break
			}
			p := d.Name()
			if rel != "." {
				p = filepath.Join(rel, p)
			}
			lines = append(lines, r.entry(p, d))
		}
	}
	if len(lines) == 0 {
		return "(empty directory)", nil
	}
	if stopped {
		lines = append(lines, fmt.Sprintf("[list_files: stopped at the limit of %s; list a subdirectory to see the rest]", plural(r.opts.MaxEntries, "entry")))
	}
	return strings.Join(lines, "\n"), nil
}

// openText opens the regular file rel for reading, or says why it cannot.
func (r *Root) openText(ctx context.Context, given, rel string) (io.ReadCloser, *lineReader, int64, error) {
	f, fi, err := r.openRegular(given, rel)
	if err != nil {
		return nil, nil, 0, err
	}
	return f, r.lines(ctx, f, r.opts.MaxLineLen), fi.Size(), nil
}

// openRegular opens rel, which the model named given, if it is a regular
// file. A named pipe, a device or a socket is refused before it is opened,
// since opening one may block until another process writes to it; the
// file is opened non-blocking and checked again, in case it was replaced
// in between.
func (r *Root) openRegular(given, rel string) (*os.File, fs.FileInfo, error) {
	fi, err := r.root.Stat(rel)
	if err != nil {
		return nil, nil, r.pathError(given, err)
	}
	if err := regular(given, fi); err != nil {
		return nil, nil, err
	}
	f, err := r.root.OpenFile(rel, os.O_RDONLY|nonBlock, 0)
	if err != nil {
		return nil, nil, r.pathError(given, err)
	}
	if fi, err = f.Stat(); err == nil {
		err = regular(given, fi)
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// regular returns nil if fi is a regular file's, or says what it is.
func regular(given string, fi fs.FileInfo) error {
	m := fi.Mode()
	what := ""
	switch {
	case m.IsRegular():
		return nil
	case m.IsDir():
		return fmt.Errorf("%q is a directory; list it with list_files", given)
	case m&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case m&fs.ModeSocket != 0:
		what = "a socket"
	case m&fs.ModeDevice != 0:
		what = "a device"
	default:
		what = "a special file"
	}
	return fmt.Errorf("%q is %s, not a regular file; only regular files are read or searched: %w", given, what, ErrNotRegular)
}

func (r *Root) readFile(ctx context.Context, in readIn) (string, error) {
	if in.Offset < 0 || in.Limit < 0 {
		return "", errors.New("offset and limit must not be negative")
	}
	offset, limit := max(in.Offset, 1), in.Limit
	if limit == 0 || limit > r.opts.MaxLines {
		limit = r.opts.MaxLines
	}
	rel, err := r.resolve(in.Path)
	if err != nil {
		return "", err
	}
	f, lr, size, err := r.openText(ctx, in.Path, rel)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if isBinary(lr.br) {
		return "", fmt.Errorf("%q is a binary file (%d bytes); read_file reads text files only", in.Path, size)
	}
	n := 0
	for n < offset-1 {
		if _, _, err := lr.next(); err != nil {
			if errors.Is(err, errLongLine) {
				return "", fmt.Errorf("%q: line %d is longer than %s, the most read_file reads of a line; it cannot read past it", in.Path, n+1, plural(lineScanLimit, "byte"))
			}
			if errors.Is(err, io.EOF) {
				if n == 0 {
					return "", fmt.Errorf("%q is empty; offset %d is past its end", in.Path, in.Offset)
				}
				return "", fmt.Errorf("%q has %d lines; offset %d is past its end", in.Path, n, in.Offset)
			}
			return "", r.pathError(in.Path, err)
		}
		n++
	}
	var b strings.Builder
	shownLines := 0
	reason := ""
	for {
		line, cut, err := lr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		long := errors.Is(err, errLongLine)
		if err != nil && !long {
			return "", r.pathError(in.Path, err)
		}
		if shownLines == limit {
			reason = plural(limit, "line")
			break
		}
		text := fmt.Sprintf("%6d\t%s\n", n+1, shown(line, cut))
		if b.Len()+len(text) > r.opts.MaxBytes && shownLines > 0 {
			reason = plural(r.opts.MaxBytes, "byte")
			break
		}
		b.WriteString(text)
		n++
		shownLines++
		if long {
			reason = "long line"
			break
		}
	}
	if shownLines == 0 {
		if offset > 1 {
			return "", fmt.Errorf("%q has %d lines; offset %d is past its end", in.Path, n, in.Offset)
		}
		return "(empty file)", nil
	}
	switch reason {
	case "":
	case "long line":
		fmt.Fprintf(&b, "[read_file: stopped in line %d, which is longer than %s, the most read_file reads of a line; the rest of the file cannot be read with read_file]\n", n, plural(lineScanLimit, "byte"))
	default:
		fmt.Fprintf(&b, "[read_file: stopped after line %d, at the limit of %s; the file goes on: read it with offset %d]\n", n, reason, n+1)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// grepLineLen bounds the part of each line grep searches: a match further
// into a longer line is not found.
const grepLineLen = 64 << 10

func (r *Root) grep(ctx context.Context, in grepIn) (string, error) {
	pattern := in.Pattern
	if in.IgnoreCase {
		pattern = "(?i)" + pattern
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", fmt.Errorf("invalid pattern: %w", err)
	}
	if in.Glob != "" {
		if _, err := path.Match(in.Glob, ""); err != nil {
			return "", fmt.Errorf("invalid glob %q: %w", in.Glob, err)
		}
	}
	rel, err := r.resolve(in.Path)
	if err != nil {
		return "", err
	}
	fi, err := r.root.Stat(rel)
	if err != nil {
		return "", r.pathError(in.Path, err)
	}
	g := &grepRun{r: r, re: re}
	if !fi.IsDir() {
		if err := regular(in.Path, fi); err != nil {
			return "", err
		}
		if err := g.file(ctx, rel); err != nil && !errors.Is(err, errGrepFull) {
			return "", err
		}
	} else {
		err := fs.WalkDir(r.root.FS(), filepath.ToSlash(rel), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if p == filepath.ToSlash(rel) {
					return err
				}
				g.unreadable = append(g.unreadable, display(p))
				return nil
			}
			if !d.Type().IsRegular() {
				return nil // directories are walked; links and special files are not followed
			}
			if in.Glob != "" {
				if ok, _ := path.Match(in.Glob, d.Name()); !ok {
					return nil
				}
			}
			if err := g.file(ctx, filepath.FromSlash(p)); err != nil {
				if errors.Is(err, errGrepFull) {
					return fs.SkipAll
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				g.unreadable = append(g.unreadable, display(p))
			}
			return nil
		})
		if err != nil {
			return "", r.pathError(in.Path, err)
		}
	}
	return g.result(in), nil
}

// errGrepFull stops a search that has found enough.
var errGrepFull = errors.New("fstools: grep: enough matches")

// grepRun is one grep call's search.
type grepRun struct {
	r          *Root
	re         *regexp.Regexp
	out        strings.Builder
	matches    int
	full       string // why the search stopped early, if it did
	binary     int
	unreadable []string
	long       []string // the files whose search stopped at a long line
}

// file searches the file rel. It returns errGrepFull when the search is to
// stop.
func (g *grepRun) file(ctx context.Context, rel string) error {
	f, _, err := g.r.openRegular(display(rel), rel)
	if err != nil {
		return err
	}
	defer f.Close()
	lr := g.r.lines(ctx, f, grepLineLen)
	if isBinary(lr.br) {
		g.binary++
		return nil
	}
	for n := 1; ; n++ {
		line, _, err := lr.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if errors.Is(err, errLongLine) {
			g.long = append(g.long, fmt.Sprintf("%s (line %d)", display(rel), n))
			err = nil // its start is searched
		}
		if err != nil {
			return err
		}
		if !g.re.Match(line) {
			continue
		}
		if g.matches == g.r.opts.MaxMatches {
			g.full = plural(g.matches, "match")
			return errGrepFull
		}
		cut := len(line) > g.r.opts.MaxLineLen
		if cut {
			line = line[:g.r.opts.MaxLineLen]
		}
		text := fmt.Sprintf("%s:%d: %s\n", display(rel), n, shown(line, cut))
		if g.out.Len()+len(text) > g.r.opts.MaxBytes {
			g.full = plural(g.r.opts.MaxBytes, "byte")
			return errGrepFull
		}
		g.out.WriteString(text)
		g.matches++
	}
}

func (g *grepRun) result(in grepIn) string {
	where := in.Path
	if where == "" {
		where = "."
	}
	var b strings.Builder
	if g.matches == 0 {
		fmt.Fprintf(&b, "no line matches %q in %s\n", in.Pattern, where)
	}
	b.WriteString(g.out.String())
	if g.full != "" {
		fmt.Fprintf(&b, "[grep: stopped at the limit of %s; narrow the pattern, the path or the glob to see the rest]\n", g.full)
	}
	if g.binary > 0 {
		fmt.Fprintf(&b, "[grep: skipped %s]\n", plural(g.binary, "binary file"))
	}
	if len(g.long) > 0 {
		fmt.Fprintf(&b, "[grep: stopped searching %s: the line is longer than %s, the most grep reads of a line]\n", strings.Join(g.long, ", "), plural(lineScanLimit, "byte"))
	}
	if len(g.unreadable) > 0 {
		fmt.Fprintf(&b, "[grep: could not read %s]\n", strings.Join(g.unreadable, ", "))
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// plural returns n and noun, in the plural unless n is 1.
func plural(n int, noun string) string {
	switch {
	case n == 1:
	case strings.HasSuffix(noun, "ch"):
		noun += "es"
	case strings.HasSuffix(noun, "y"):
		noun = noun[:len(noun)-1] + "ies"
	default:
		noun += "s"
	}
	return fmt.Sprintf("%d %s", n, noun)
}
