package fstools

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/toolrun/toolrun"
)

// Defaults of [Options].
const (
	// DefaultMaxEntries bounds the entries of one list_files call.
	DefaultMaxEntries = 1000
	// DefaultMaxLines bounds the lines of one read_file call.
	DefaultMaxLines = 2000
	// DefaultMaxBytes bounds the text of one read_file or grep result.
	DefaultMaxBytes = 64 << 10
	// DefaultMaxMatches bounds the matching lines of one grep call.
	DefaultMaxMatches = 200
	// DefaultMaxLineLen bounds each line shown by read_file and grep.
	DefaultMaxLineLen = 2000
)

// ErrNotRegular is wrapped by the error of a read_file or grep call whose
// path is a named pipe (FIFO), a device, a socket or another special file:
// only regular files are read, and such files are never opened, since
// opening or reading one can block for ever.
var ErrNotRegular = errors.New("not a regular file")

// ErrOutside is wrapped by the error of a call whose path is outside the
// working directory: "..", an absolute path elsewhere, or a symbolic link
// that leads out of it.
var ErrOutside = errors.New("path is outside the working directory")

// OutsideError is the failure of a call whose path is outside the working
// directory. Its message, which the model receives, says so and how to name
// a path instead.
type OutsideError struct {
	// Path is the path as the model gave it.
	Path string
	// Symlink reports that the path is inside the directory by its name
	// but goes through a symbolic link that leads outside it, or whose
	// target is an absolute path, which the [os.Root] refuses even when it
	// points inside.
	Symlink bool
	// Example is a path inside the directory that the message suggests
	// besides ".": the given path without its way out if that exists
	// (for "../notes.txt", "notes.txt"), else an entry of the directory.
	// Empty suggests "." alone.
	Example string
}

// Error says that the path is outside and what paths are accepted.
func (e *OutsideError) Error() string {
	why := ""
	if e.Symlink {
		why = " (it goes through a symbolic link that points outside it, or to an absolute path)"
	}
	such := `"."`
	if e.Example != "" && e.Example != "." {
		such = fmt.Sprintf(`"." or %q`, e.Example)
	}
	return fmt.Sprintf("path %q is outside the working directory%s; only paths inside it can be read, such as %s", e.Path, why, such)
}

// Is reports whether target is [ErrOutside].
func (e *OutsideError) Is(target error) bool { return target == ErrOutside }

// Options bounds what the tools return. The zero value is ready to use:
// every field's zero means its default.
type Options struct {
	// MaxEntries bounds the entries of one list_files call; zero means
	// [DefaultMaxEntries].
	MaxEntries int
	// MaxLines bounds the lines of one read_file call, and is the default
	// of its limit; zero means [DefaultMaxLines].
	MaxLines int
	// MaxBytes bounds the text of one read_file or grep result; zero means
	// [DefaultMaxBytes].
	MaxBytes int
	// MaxMatches bounds the matching lines of one grep call; zero means
	// [DefaultMaxMatches].
	MaxMatches int
	// MaxLineLen bounds each line shown by read_file and grep, in bytes;
	// a longer line is cut and marked. Zero means [DefaultMaxLineLen].
	MaxLineLen int
}

func (o *Options) setDefaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.MaxEntries, DefaultMaxEntries)
	def(&o.MaxLines, DefaultMaxLines)
	def(&o.MaxBytes, DefaultMaxBytes)
	def(&o.MaxMatches, DefaultMaxMatches)
	def(&o.MaxLineLen, DefaultMaxLineLen)
}

// Root is a directory opened for the tools. Its methods are safe for
// concurrent use, so the calls of one turn may run in parallel.
type Root struct {
	dir  string // absolute, as given
	real string // dir with its symbolic links resolved
	root *os.Root
	opts Options
}

// Open opens dir for the tools. opts may be nil. Close the Root when the
// run is over.
func Open(dir string, opts *Options) (*Root, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("fstools: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("fstools: %w", err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("fstools: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("fstools: %s is not a directory", dir)
	}
	root, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("fstools: %w", err)
	}
	r := &Root{dir: abs, real: real, root: root}
	if opts != nil {
		r.opts = *opts
	}
	r.opts.setDefaults()
	return r, nil
}

// Dir returns the directory's absolute path.
func (r *Root) Dir() string { return r.dir }

// Close closes the directory. Calls made after Close fail.
func (r *Root) Close() error { return r.root.Close() }

// Tools returns list_files, read_file and grep, in that order.
func (r *Root) Tools() []toolrun.Tool {
	tools := []*toolrun.FuncTool{
		toolrun.NewTool("list_files", "Lists a directory of the working directory: directories end with \"/\", files show their size. With recursive, lists the whole tree under it. Paths are relative to the working directory; nothing outside it can be listed.", r.listFiles),
		toolrun.NewTool("read_file", "Reads a text file of the working directory, with line numbers. Reads up to limit lines from line offset (counting from 1); a longer file says how to read on. Paths are relative to the working directory; nothing outside it can be read.", r.readFile),
		toolrun.NewTool("grep", "Finds the lines that match a regular expression (Go RE2 syntax) in a file or in every file under a directory of the working directory, as path:line: text. Binary files are skipped. Paths are relative to the working directory.", r.grep),
	}
	out := make([]toolrun.Tool, len(tools))
	for i, t := range tools {
		t.Idempotent = true // they only read
		out[i] = t
	}
	return out
}

// resolve returns the path, relative to the directory, that p names, or an
// *OutsideError. The os.Root refuses such paths anyway; resolve is there so
// the model learns why in plain words.
func (r *Root) resolve(p string) (string, error) {
	given := p
	if p == "" {
		p = "."
	}
	if filepath.IsAbs(p) {
		p = filepath.Clean(p)
		rel, ok := within(r.dir, p)
		if !ok {
			rel, ok = within(r.real, p)
		}
		if !ok {
			return "", r.outside(given, false)
		}
		p = rel
	}
	p = filepath.Clean(p)
	if p != "." && !filepath.IsLocal(p) {
		return "", r.outside(given, false)
	}
	if resolved, err := filepath.EvalSymlinks(filepath.Join(r.real, p)); err == nil {
		if _, ok := within(r.real, resolved); !ok {
			return "", r.outside(given, true)
		}
	}
	return p, nil
}

// outside returns the *OutsideError of the path given, with an example
// of a path the model may give instead: the given path without its way
// out, its leading ".." or the root of an absolute path, or its last
// element, if either names something in the directory; else an entry of
// the directory, the first by name of those it lists first.
func (r *Root) outside(given string, symlink bool) error {
	e := &OutsideError{Path: given, Symlink: symlink}
	var parts []string
	for _, part := range strings.Split(filepath.ToSlash(filepath.Clean(given)), "/") {
		if part != "" && part != "." && part != ".." && !strings.HasSuffix(part, ":") {
			parts = append(parts, part)
		}
	}
	var candidates []string
	if len(parts) > 0 {
		candidates = append(candidates, strings.Join(parts, "/"), parts[len(parts)-1])
	}
	for _, c := range candidates {
		if _, err := r.root.Stat(filepath.FromSlash(c)); err == nil && !symlink {
			e.Example = c
			return e
		}
	}
	if d, err := r.root.Open("."); err == nil {
		names, _ := d.Readdirnames(64)
		d.Close()
		slices.Sort(names)
		for _, n := range names {
			if !strings.HasPrefix(n, ".") {
				e.Example = n
				break
			}
		}
	}
	return e
}

// within returns p relative to dir, if p is dir or inside it.
func within(dir, p string) (string, bool) {
	rel, err := filepath.Rel(dir, p)
	if err != nil || (rel != "." && !filepath.IsLocal(rel)) {
		return "", false
	}
	return rel, true
}

// pathError turns an error of the os.Root about the path the model gave
// into words for the model.
func (r *Root) pathError(given string, err error) error {
	var pe *fs.PathError
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("%q does not exist in the working directory", given)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("%q cannot be read: permission denied", given)
	case errors.As(err, &pe) && pe.Err.Error() == "path escapes from parent":
		// The os.Root found a way out that resolve did not see (a link
		// changed in between, say).
		return r.outside(given, true)
	}
	return fmt.Errorf("%q: %w", given, err)
}

// display returns rel as the model should see it: slash-separated.
func display(rel string) string { return filepath.ToSlash(rel) }

// sniffLen is how much of a file is read to tell text from binary, as git
// does.
const sniffLen = 8000

// isBinary reports whether the start of a file looks binary: it has a NUL
// byte.
func isBinary(br *bufio.Reader) bool {
	head, _ := br.Peek(sniffLen)
	return strings.IndexByte(string(head), 0) >= 0
}

// readChunk is the size of a file's read buffer, and so the most read_file
// and grep read between two looks at their context.
const readChunk = 64 << 10

// lineScanLimit bounds what read_file and grep read of one line: a file
// with a longer line, such as a huge file with no line ending, is read up
// to there, and no further.
const lineScanLimit = 1 << 20

// errLongLine is the error of a line longer than lineScanLimit.
var errLongLine = errors.New("fstools: line longer than the scan limit")

// lineReader reads the lines of a file, each cut to max bytes. It stops
// when its context is done, looking at it every readChunk bytes at most.
type lineReader struct {
	ctx  context.Context
	br   *bufio.Reader
	max  int
	done bool // a line was too long: the file is read no further
}

// lines returns a lineReader of f that cuts lines to max bytes.
func (r *Root) lines(ctx context.Context, f io.Reader, max int) *lineReader {
	return &lineReader{ctx: ctx, br: bufio.NewReaderSize(f, readChunk), max: max}
}

// next returns the next line without its line ending, cut to max bytes,
// and whether it was cut. It returns io.EOF after the last line, and the
// context's error once it is done. A line longer than lineScanLimit is
// returned cut, with errLongLine, and is the last.
func (l *lineReader) next() (line []byte, cut bool, err error) {
	if l.done {
		return nil, false, io.EOF
	}
	var buf []byte
	n := 0
	for {
		if err := l.ctx.Err(); err != nil {
			return nil, false, err
		}
		chunk, err := l.br.ReadSlice('\n')
		n += len(chunk)
		if room := l.max - len(buf); room > 0 {
			buf = append(buf, chunk[:min(room, len(chunk))]...)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			if n >= lineScanLimit {
				l.done = true
				return buf, true, errLongLine
			}
			continue
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, false, err
		}
		if n == 0 {
			return nil, false, io.EOF
		}
		end := n
		if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
			end--
		}
		if len(buf) > end {
			buf = buf[:end]
		}
		cut = end > len(buf)
		if !cut && len(buf) > 0 && buf[len(buf)-1] == '\r' {
			buf = buf[:len(buf)-1]
		}
		return buf, cut, nil
	}
}

// shown returns a line as text for the model: valid UTF-8, and marked if
// it was cut.
func shown(line []byte, cut bool) string {
	s := strings.ToValidUTF8(string(line), "\uFFFD")
	if cut {
		// Cutting may have split a character: ToValidUTF8 made it one
		// replacement character, which is fine in a line marked as cut.
		s += " …[line cut]"
	}
	return s
}
