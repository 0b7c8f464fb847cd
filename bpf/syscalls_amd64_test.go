//go:build linux

package bpf

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func unsafePointer[T any](p *T) unsafe.Pointer { return unsafe.Pointer(p) }

// legacySyscalls makes the path syscalls that only x86_64 has.
func legacySyscalls(fail func(string, error)) {
	call := func(what string, nr uintptr, args ...string) uintptr {
		var a [3]uintptr
		for i, s := range args {
			p, _ := unix.BytePtrFromString(s)
			a[i] = uintptr(unsafe.Pointer(p))
		}
		if what == "open" {
			a[1] = unix.O_RDONLY
		}
		if what == "creat" || what == "mkdir" {
			a[1] = 0o700
		}
		r, _, errno := unix.Syscall(nr, a[0], a[1], a[2])
		if errno != 0 && what != "open" {
			fail(what, errno)
		}
		return r
	}
	call("open", unix.SYS_OPEN, "missing-open")
	unix.Close(int(call("creat", unix.SYS_CREAT, "f-creat")))
	call("mkdir", unix.SYS_MKDIR, "d-mkdir")
	call("rename", unix.SYS_RENAME, "d-mkdir", "d-rename")
	call("rmdir", unix.SYS_RMDIR, "d-rename")
	call("unlink", unix.SYS_UNLINK, "f-creat")
}

func legacyWants(abs func(string) string) []want {
	is := func(k Kind, p string, ret func(int64) bool) func(Event) bool {
		return func(e Event) bool {
			return e.Kind == k && e.Path == p && ret(e.Ret) && e.Dirfd == AtFDCWD &&
				(e.AbsPath == abs(p) || e.AbsPath == "")
		}
	}
	ok := func(r int64) bool { return r >= 0 }
	return []want{
		{"open missing", is(KindOpen, "missing-open", func(r int64) bool { return r == -int64(unix.ENOENT) })},
		{"creat", func(e Event) bool {
			return is(KindOpen, "f-creat", ok)(e) && e.Flags == unix.O_CREAT|unix.O_WRONLY|unix.O_TRUNC
		}},
		{"mkdir", func(e Event) bool { return is(KindMkdir, "d-mkdir", ok)(e) && e.Flags == 0o700 }},
		{"rename", func(e Event) bool {
			return e.Kind == KindRename && e.Path == "d-mkdir" && e.Path2 == "d-rename" && e.OK() &&
				e.AbsPath == abs("d-mkdir") && (e.AbsPath2 == "" || e.AbsPath2 == abs("d-rename"))
		}},
		{"rmdir", is(KindRmdir, "d-rename", ok)},
		{"unlink", is(KindUnlink, "f-creat", ok)},
	}
}
