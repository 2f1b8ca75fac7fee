package toolrun

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	anthropic "github.com/anthropics/anthropic-sdk-go/v2"
)

// ErrNoState is wrapped by the error of [Store.Load] when no state is saved
// for a run.
var ErrNoState = errors.New("toolrun: no saved state")

// Store keeps the [State] of runs so that a run outlives its process. With
// [Options.Store] set, a runner saves its state after every step: when a
// response arrives, before each tool call starts (the call is journaled as
// started), when it finishes (with its result), when a turn is committed and
// when the run stops. [Open] resumes a run from its saved state.
//
// Implementations must make Save atomic: a crash in the middle of a Save
// leaves the previous state readable. The runner calls Save from one
// goroutine at a time.
type Store interface {
	// Save replaces the saved state of run id with s.
	Save(ctx context.Context, id string, s *State) error
	// Load returns the saved state of run id, or an error wrapping
	// [ErrNoState] if there is none.
	Load(ctx context.Context, id string) (*State, error)
	// Delete removes the saved state of run id; it is not an error if there
	// is none.
	Delete(ctx context.Context, id string) error
}

// FileStore is a [Store] that keeps each run's state as a JSON file in Dir.
// Saves are atomic: the state is written to a temporary file, synced, and
// renamed over the previous one, so a crash leaves either the old state or
// the new one, never a torn file.
type FileStore struct {
	// Dir is the directory of the state files. It is created on the first
	// Save if it does not exist.
	Dir string
}

// path returns the file of run id. The id is escaped so that any string is
// a safe file name and two ids never share a file.
func (f *FileStore) path(id string) string {
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
	return filepath.Join(f.Dir, b.String()+".state.json")
}

// Save writes s as the state of run id, atomically.
func (f *FileStore) Save(ctx context.Context, id string, s *State) error {
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("toolrun: file store: encoding the state of %q: %w", id, err)
	}
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	tmp, err := os.CreateTemp(f.Dir, ".tmp-*")
	if err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("toolrun: file store: writing the state of %q: %w", id, err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("toolrun: file store: syncing the state of %q: %w", id, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	if err := os.Rename(tmp.Name(), f.path(id)); err != nil {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	// Sync the directory so the rename itself survives a power loss.
	if d, err := os.Open(f.Dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// Load reads the state of run id.
func (f *FileStore) Load(ctx context.Context, id string) (*State, error) {
	data, err := os.ReadFile(f.path(id))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w for run %q in %s", ErrNoState, id, f.Dir)
	}
	if err != nil {
		return nil, fmt.Errorf("toolrun: file store: %w", err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("toolrun: file store: decoding the state of %q: %w", id, err)
	}
	return &s, nil
}

// Delete removes the state of run id.
func (f *FileStore) Delete(ctx context.Context, id string) error {
	err := os.Remove(f.path(id))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("toolrun: file store: %w", err)
	}
	return nil
}

// Open returns the runner of run opts.RunID: resumed from its state in
// opts.Store if one is saved, otherwise new with params. Either way the
// runner saves its state to the store as it goes. Calls that started before
// a crash and never finished are run again only if their tool is
// [ToolConfig.Idempotent]; otherwise the model is told they were
// interrupted ([ErrInterrupted]).
func Open(ctx context.Context, client anthropic.Client, params anthropic.BetaMessageNewParams, tools []Tool, opts *Options) (*Runner, error) {
	if opts == nil || opts.Store == nil || opts.RunID == "" {
		return nil, errors.New("toolrun: open: Options.Store and Options.RunID are required")
	}
	s, err := opts.Store.Load(ctx, opts.RunID)
	if errors.Is(err, ErrNoState) {
		return New(client, params, tools, opts), nil
	}
	if err != nil {
		return nil, err
	}
	return Resume(client, s, tools, opts)
}

// save writes the run's state to Options.Store, if set, signed with
// Options.StateKey. A failure is kept and stops the run at its next step,
// since a run whose journal cannot be written could run a call twice after
// a crash.
func (r *Runner) save(ctx context.Context) error {
	if r.opts.Store == nil {
		return nil
	}
	s := r.snapshot()
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	if r.saveErr != nil {
		return r.saveErr
	}
	s.Version = r.version + 1
	err := s.sign(r.opts.StateKey)
	if err == nil {
		err = r.opts.Store.Save(context.WithoutCancel(ctx), r.opts.RunID, s)
	}
	if err != nil {
		err = fmt.Errorf("toolrun: saving the state of run %q: %w", r.opts.RunID, err)
		r.saveErr = err
		r.log.ErrorContext(ctx, "toolrun: checkpoint failed", "run_id", r.opts.RunID, "error", err.Error())
		return err
	}
	r.version = s.Version
	return nil
}

// hasSaveErr reports whether a save failed.
func (r *Runner) hasSaveErr() bool {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	return r.saveErr != nil
}

// takeSaveErr returns, and forgets, the first failed save.
func (r *Runner) takeSaveErr() error {
	r.saveMu.Lock()
	defer r.saveMu.Unlock()
	err := r.saveErr
	r.saveErr = nil
	return err
}
