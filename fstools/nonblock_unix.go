//go:build unix

package fstools

import "syscall"

// nonBlock makes opening a named pipe return at once rather than wait for
// a writer.
const nonBlock = syscall.O_NONBLOCK
