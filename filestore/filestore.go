// Package filestore keeps the states of toolrun runs as files in a
// directory: the [toolrun.Store] that needs no server, for a program on one
// machine (or several sharing a file system with working locks), as
// package sqlitestore is the one for a database.
//
//	opts := &toolrun.Options{Store: &filestore.Store{Dir: "runs"}, RunID: "order-42"}
//	r, err := toolrun.Open(ctx, client, params, tools, opts)
package filestore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/toolrun/toolrun"
	"github.com/toolrun/toolrun/driver"
	"github.com/toolrun/toolrun/filelock"
)

// A Store saves a step as what it changed, and keeps a driver's blobs.
var (
	_ driver.StateAppender = (*Store)(nil)
	_ driver.BlobStore     = (*Store)(nil)
)

// Store is a [toolrun.Store] that keeps each run's state as a JSON file in Dir.
// The zero value with Dir set is ready to use, and several Stores, in
// one process or many, may share a directory.
//
// Saves are atomic: the state is written to a temporary file, synced, and
// renamed over the previous one, so a crash leaves either the old state or
// the new one, never a torn file. Each save holds an OS lock on a lock file
// of its run (flock) while it compares versions and renames; the OS releases
// it when the process dies, so a killed process never leaves a run locked.
// The temporary file a killed save leaves behind is removed by the next
// Save, Load or Delete of that run.
//
// Store is a [github.com/toolrun/toolrun/driver.StateAppender]: a save that changes only the calls of the
// turn in progress (and the small rest of the state) is appended as a line
// to the run's changes file and synced, rather than written whole, so that
// a turn of n calls writes what its calls add, not n copies of the turn;
// the next Save writes the whole state again and empties the changes file. On systems without flock (Windows,
// Plan 9, js/wasm) Save and Delete return an error wrapping
// [errors.ErrUnsupported].
type Store struct {
	// Dir is the directory of the state files. It is created on the first
	// Save if it does not exist.
	Dir string
}

// name returns the base of the files of run id: the state is name.state.json,
// the changes appended to it name.changes.jsonl, the temporary file of a
// save in progress name.state.json.tmp, and the lock name.lock. The id is escaped so that any string is a safe file name and two
// ids never share a file; the suffixes keep the three kinds apart.
func (f *Store) name(id string) string {
	var b strings.Builder
	for _, r := range id {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.' && b.Len() > 0:
			b.WriteRune(r)
		default:
			for _, c := range []byte(string(r)) {
				fmt.Fprintf(&b, "%%%02X", c)
			}
		}
	}
	return filepath.Join(f.Dir, b.String())
}

// Save writes s as the state of run id, atomically, if the saved state's
// Version is prev.
func (f *Store) Save(ctx context.Context, id string, s *toolrun.State, prev uint64) error {
	if s.Version <= prev {
		return fmt.Errorf("toolrun: file store: saving version %d of run %q over version %d", s.Version, id, prev)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("toolrun: file store: saving the state of %q: %w", id, err)
	}
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("toolrun: file store: encoding the state of %q: %w", id, err)
	}
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	name := f.name(id)
	unlock, err := lockFile(name + ".lock")
	if err != nil {
		return fmt.Errorf("toolrun: file store: locking run %q: %w", id, err)
	}
	defer unlock()
	cur, _, err := currentVersion(name)
	if err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	if cur != prev {
		return fmt.Errorf("toolrun: file store: run %q is at version %d, not %d: %w", id, cur, prev, toolrun.ErrRunBusy)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("toolrun: file store: saving the state of %q: %w", id, err)
	}
	// The lock is held, so the temporary file is this save's alone; one left
	// by a killed save is truncated here and renamed or removed below.
	tmp := name + ".state.json.tmp"
	if err := writeSynced(tmp, data); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("toolrun: file store: writing the state of %q: %w", id, err)
	}
	if err := os.Rename(tmp, name+".state.json"); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	// Sync the directory so the rename itself survives a power loss.
	syncDir(f.Dir)
	// The changes appended to the state replaced are of an older base: a
	// Load skips them, so emptying their file is tidiness, not safety (a
	// crash before it leaves them to be skipped).
	if err := os.Truncate(name+".changes.jsonl", 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	return nil
}

// syncDir syncs directory dir, so that a file created or renamed in it
// survives a power loss.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// changeLine is one line of a run's changes file: a [toolrun.StateChange] appended
// to the state file of version Base, making version Version out of Prev.
type changeLine struct {
	Base    uint64          `json:"base"`
	Prev    uint64          `json:"prev"`
	Version uint64          `json:"version"`
	Change  json.RawMessage `json:"change,omitempty"`
}

// Append saves version c.Version of run id as a change to the version it
// holds, if that is prev: one line appended to the run's changes file and
// synced, so that a save costs what the change holds, not the whole state.
// The state file stays as the last Save wrote it; Load applies the changes
// after it. A line a killed Append left half-written was never
// acknowledged: Load skips it and the next Append cuts it off.
func (f *Store) Append(ctx context.Context, id string, c *toolrun.StateChange, prev uint64) error {
	if c.Version <= prev || prev == 0 {
		return fmt.Errorf("toolrun: file store: appending version %d of run %q to version %d", c.Version, id, prev)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("toolrun: file store: appending to the state of %q: %w", id, err)
	}
	change, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("toolrun: file store: encoding a change of %q: %w", id, err)
	}
	name := f.name(id)
	unlock, err := lockFile(name + ".lock")
	if err != nil {
		return fmt.Errorf("toolrun: file store: locking run %q: %w", id, err)
	}
	defer unlock()
	cur, base, err := currentVersion(name)
	if err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	if cur != prev {
		return fmt.Errorf("toolrun: file store: run %q is at version %d, not %d: %w", id, cur, prev, toolrun.ErrRunBusy)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("toolrun: file store: appending to the state of %q: %w", id, err)
	}
	line, err := json.Marshal(changeLine{Base: base, Prev: prev, Version: c.Version, Change: change})
	if err != nil {
		return fmt.Errorf("toolrun: file store: encoding a change of %q: %w", id, err)
	}
	path := name + ".changes.jsonl"
	_, statErr := os.Lstat(path)
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	if _, err := w.Write(append(line, '\n')); err != nil {
		w.Close()
		return fmt.Errorf("toolrun: file store: appending to the state of %q: %w", id, err)
	}
	if err := w.Sync(); err != nil {
		w.Close()
		return fmt.Errorf("toolrun: file store: appending to the state of %q: %w", id, err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	if statErr != nil {
		syncDir(f.Dir)
	}
	return nil
}

// currentVersion returns the version of the run whose files are named
// name, 0 if none is saved, and the version of its state file (the base
// of its changes). It reads the start of the state file and the last line
// of the changes file, not the whole run, and cuts off a half-written last
// line (a killed Append's), so it must be called with the run's lock held.
func currentVersion(name string) (cur, base uint64, err error) {
	base, err = savedVersion(name + ".state.json")
	if err != nil || base == 0 {
		return base, base, err
	}
	last, err := lastChange(name + ".changes.jsonl")
	if err != nil {
		return 0, 0, err
	}
	if last != nil && last.Base == base {
		return last.Version, base, nil
	}
	return base, base, nil
}

// lastChange returns the last whole line of the changes file at path, or
// nil if there is none, cutting off a line not ended by a newline.
func lastChange(path string) (*changeLine, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	// Read back from the end, a block at a time, to the newline before
	// the last line.
	size := fi.Size()
	var tail []byte
	end := size // the end of the whole lines
	for off := size; off > 0; {
		n := min(off, 64<<10)
		off -= n
		buf := make([]byte, n)
		if _, err := f.ReadAt(buf, off); err != nil {
			return nil, err
		}
		tail = append(buf, tail...)
		if end == size && len(tail) > 0 && tail[len(tail)-1] != '\n' {
			// A half-written line: find where it starts, and cut it off.
			i := bytes.LastIndexByte(tail, '\n')
			if i < 0 {
				if off > 0 {
					continue
				}
				end = 0
			} else {
				end = off + int64(i) + 1
			}
			if err := f.Truncate(end); err != nil {
				return nil, err
			}
			tail = tail[:end-off]
		}
		if end == 0 {
			return nil, nil
		}
		// tail ends with the newline of the last line; the line starts
		// after the newline before it.
		if i := bytes.LastIndexByte(tail[:len(tail)-1], '\n'); i >= 0 || off == 0 {
			var l changeLine
			if err := json.Unmarshal(tail[i+1:], &l); err != nil {
				return nil, fmt.Errorf("decoding the last change of %s: %w", path, err)
			}
			return &l, nil
		}
	}
	return nil, nil
}

// writeSynced writes data to the file at path, replacing it, and syncs it.
func writeSynced(path string, data []byte) error {
	t, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := t.Write(data); err != nil {
		t.Close()
		return err
	}
	if err := t.Sync(); err != nil {
		t.Close()
		return err
	}
	return t.Close()
}

// savedVersion returns the Version of the state file at path, 0 if there is
// none. It reads the file only up to the version, which a State's JSON
// has second, so that checking a version does not cost a read of the state.
func savedVersion(path string) (uint64, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	d := json.NewDecoder(f)
	bad := func(err error) (uint64, error) { return 0, fmt.Errorf("decoding %s: %w", path, err) }
	if t, err := d.Token(); err != nil {
		return bad(err)
	} else if t != json.Delim('{') {
		return bad(errors.New("not a JSON object"))
	}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return bad(err)
		}
		if t == "version" {
			var v uint64
			if err := d.Decode(&v); err != nil {
				return bad(err)
			}
			return v, nil
		}
		var skip json.RawMessage
		if err := d.Decode(&skip); err != nil {
			return bad(err)
		}
	}
	return 0, nil
}

// Load reads the state of run id, with the changes appended to it. It
// needs no lock: a save replaces the file in one rename, and an Append
// adds a line a Load reads whole or not at all. Like Save, Append and
// Delete, it does nothing with a context already done but return its
// error.
func (f *Store) Load(ctx context.Context, id string) (*toolrun.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("toolrun: file store: loading the state of %q: %w", id, err)
	}
	name := f.name(id)
	if _, err := os.Lstat(name + ".state.json.tmp"); err == nil {
		// A save in progress, or one killed midway: once the lock is free,
		// whatever is left is a killed save's.
		if unlock, err := lockFile(name + ".lock"); err == nil {
			os.Remove(name + ".state.json.tmp")
			unlock()
		}
	}
	data, err := os.ReadFile(name + ".state.json")
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("toolrun: file store: no saved state for run %q: %w", id, err)
	}
	if err != nil {
		return nil, fmt.Errorf("toolrun: file store: %w", err)
	}
	var s toolrun.State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("toolrun: file store: decoding the state of %q: %w", id, err)
	}
	changes, err := os.ReadFile(name + ".changes.jsonl")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("toolrun: file store: %w", err)
	}
	base := s.Version
	for len(changes) > 0 {
		i := bytes.IndexByte(changes, '\n')
		if i < 0 {
			break // a line being written, or a killed Append's: not saved
		}
		line := changes[:i]
		changes = changes[i+1:]
		var l changeLine
		if err := json.Unmarshal(line, &l); err != nil {
			return nil, fmt.Errorf("toolrun: file store: decoding a change of %q: %w", id, err)
		}
		if l.Base != base {
			continue // appended to a state a later Save replaced
		}
		if l.Prev != s.Version {
			return nil, fmt.Errorf("toolrun: file store: a change of %q makes version %d out of %d, and the state is at %d", id, l.Version, l.Prev, s.Version)
		}
		var c toolrun.StateChange
		if err := json.Unmarshal(l.Change, &c); err != nil {
			return nil, fmt.Errorf("toolrun: file store: decoding a change of %q: %w", id, err)
		}
		if err := s.Apply(&c); err != nil {
			return nil, fmt.Errorf("toolrun: file store: the change to version %d of %q: %w", l.Version, id, err)
		}
	}
	return &s, nil
}

// Delete removes the state of run id, with its lock file and any temporary
// file a killed save left.
func (f *Store) Delete(ctx context.Context, id string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("toolrun: file store: deleting the state of %q: %w", id, err)
	}
	if _, err := os.Stat(f.Dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	name := f.name(id)
	unlock, err := lockFile(name + ".lock")
	if err != nil {
		return fmt.Errorf("toolrun: file store: locking run %q: %w", id, err)
	}
	defer unlock()
	for _, suffix := range []string{".state.json", ".changes.jsonl", ".state.json.tmp", ".lock"} {
		// lockFile notices a lock file removed under it, so removing it
		// while holding it is safe.
		if err := os.Remove(name + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("toolrun: file store: %w", err)
		}
	}
	return nil
}

// blobPath returns the file of blob key: the suffix keeps blobs apart
// from the states, the locks and the temporary files.
func (f *Store) blobPath(key string) string { return f.name(key) + ".blob" }

// PutBlob saves b under key, replacing what was there, atomically: it is
// written to a temporary file of its own, synced, and renamed into place,
// so that a reader sees the old bytes or the new ones, and concurrent
// PutBlobs of one key leave one of them whole. Blobs are bytes a driver
// keeps next to the states it saves, such as the large values the temporal
// module's claim check keeps out of a workflow's history; they share Dir
// with the states, and no key of a blob is ever a state's.
func (f *Store) PutBlob(ctx context.Context, key string, b []byte) error {
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	t, err := os.CreateTemp(f.Dir, ".blob-*.tmp")
	if err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	tmp := t.Name()
	t.Close()
	if err := writeSynced(tmp, b); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("toolrun: file store: writing blob %q: %w", key, err)
	}
	if err := os.Rename(tmp, f.blobPath(key)); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	return nil
}

// GetBlob returns the bytes PutBlob saved under key, or an
// error wrapping [fs.ErrNotExist] if there are none.
func (f *Store) GetBlob(ctx context.Context, key string) ([]byte, error) {
	b, err := os.ReadFile(f.blobPath(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("toolrun: file store: no blob %q: %w", key, err)
	}
	if err != nil {
		return nil, fmt.Errorf("toolrun: file store: %w", err)
	}
	return b, nil
}

// DeleteBlob removes the blob under key; it is not an error if there is
// none.
func (f *Store) DeleteBlob(ctx context.Context, key string) error {
	if err := os.Remove(f.blobPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	return nil
}

// lockFile takes an exclusive lock on the file at path, creating it if need
// be, waiting for its holder, and returns the function that releases it.
// The OS releases it too if the process dies. On systems without flock it
// fails: a Store's compare-and-swap needs the lock, and a Store
// without it could let two runners own a run.
func lockFile(path string) (unlock func(), err error) {
	l, err := filelock.Acquire(path, 0o644)
	if err != nil {
		return nil, err
	}
	return func() { l.Unlock() }, nil
}
