// Package sysnum holds the system call and errno numbers of the
// architectures jail supports (amd64, arm64), whatever architecture the
// program is built for. golang.org/x/sys/unix gives only the numbers of the
// architecture being built, so tests on one machine cannot check a table or
// a seccomp program made for the other without these.
//
// The tables are generated from golang.org/x/sys/unix
// (zsysnum_linux_GOARCH.go, zerrors_linux_GOARCH.go) by gen.go:
//
//	go generate ./internal/sysnum
//
// and TestTablesCurrent checks that they match the x/sys version in go.mod.
package sysnum

//go:generate go run gen.go

// Architectures are the GOARCH values the tables cover.
var Architectures = []string{"amd64", "arm64"}

// Syscalls maps the system call names of goarch (lower case, as x/sys
// spells them without SYS_, e.g. "openat", "newfstatat") to their numbers;
// nil for an architecture the tables do not cover. The caller must not
// modify the map.
func Syscalls(goarch string) map[string]uint32 { return syscalls[goarch] }

// Errnos maps the errno names of goarch ("EPERM") to their numbers; nil
// for an architecture the tables do not cover. The caller must not modify
// the map.
func Errnos(goarch string) map[string]uint32 { return errnos[goarch] }

// Name returns the name of system call nr on goarch, "" if it has none.
func Name(goarch string, nr uint32) string {
	for name, n := range syscalls[goarch] {
		if n == nr {
			return name
		}
	}
	return ""
}
