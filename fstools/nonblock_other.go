//go:build !unix

package fstools

// nonBlock is zero where opening a file cannot block on a writer.
const nonBlock = 0
