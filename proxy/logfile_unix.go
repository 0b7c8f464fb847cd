//go:build linux || darwin

package proxy

import (
	"io/fs"
	"syscall"
)

// removed reports whether the open file fi describes has no name left:
// rotated out of the kept logs while a writer still held it.
func removed(fi fs.FileInfo) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && st.Nlink == 0
}
