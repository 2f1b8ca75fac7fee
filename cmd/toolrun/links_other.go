//go:build !unix

package main

import "os"

// linkCount returns 1: hard links are not counted on this system.
func linkCount(fi os.FileInfo) uint64 { return 1 }
