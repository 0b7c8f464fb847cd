package remote

import (
	"fmt"
	"os"
	"syscall"
)

// sumKey identifies a file's content for the checksum cache: a binary
// rebuilt in place gets a new size, time or inode.
func sumKey(fi os.FileInfo) string {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Sprintf("%d:%d", fi.Size(), fi.ModTime().UnixNano())
	}
	return fmt.Sprintf("%d:%d:%d:%d:%d", fi.Size(), fi.ModTime().UnixNano(), st.Ino, st.Dev, st.Ctim.Nano())
}
