//go:build !unix

package toolrun

import (
	"errors"
	"fmt"
	"runtime"
)

// lockFile fails: FileStore's compare-and-swap needs flock, which this
// system lacks, and a FileStore without it could let two runners own a run.
func lockFile(path string) (unlock func(), err error) {
	return nil, fmt.Errorf("locking %s on %s: %w", path, runtime.GOOS, errors.ErrUnsupported)
}
