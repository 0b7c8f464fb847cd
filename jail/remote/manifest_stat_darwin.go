package remote

import "syscall"

// ctimeOf is the inode change time of st, Unix nanoseconds.
func ctimeOf(st *syscall.Stat_t) int64 { return st.Ctimespec.Nano() }
