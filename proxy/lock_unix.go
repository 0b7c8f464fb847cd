//go:build linux || darwin

package proxy

import (
	"os"
	"syscall"
)

// lockFile takes an exclusive flock(2) on path, creating it, and returns
// the function that releases it. Separate opens conflict, so the lock
// serializes goroutines of one process as well as processes.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
