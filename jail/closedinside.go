package jail

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ClosedInside reports whether a path the walk could not read holds
// nothing the jailed process could reach either: it no longer exists, or a
// directory on the way (the path itself or a parent) is neither owned by
// the user nor searchable to them. The jail runs as the same uid without
// capabilities, so it can neither search such a directory nor chmod it.
// As root every read succeeds, so an error as root is never a permission
// the jail lacks too.
func ClosedInside(path string, err error) bool {
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if !errors.Is(err, fs.ErrPermission) || os.Getuid() == 0 {
		return false
	}
	for d := path; ; d = filepath.Dir(d) {
		fi, err := os.Lstat(d)
		if errors.Is(err, fs.ErrPermission) && d != "/" {
			continue // a parent closes it: look further up
		}
		if err != nil {
			return false
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		return ok && int(st.Uid) != os.Getuid() && syscall.Access(d, 1 /* X_OK */) != nil
	}
}
