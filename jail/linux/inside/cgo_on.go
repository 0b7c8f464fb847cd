//go:build cgo

package inside

// builtWithCgo is whether this binary is built with cgo, whose threads
// syscall.AllThreadsSyscall cannot reach (without cgo it always can).
const builtWithCgo = true
