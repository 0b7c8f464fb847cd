package remote

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// lockState holds the project's sync state dir for one sync or fetch:
// two jails syncing the same project with the same host take turns,
// so neither reads a manifest the other is rewriting.
func lockState(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("locking the sync state: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("locking the sync state: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking the sync state: %w", err)
	}
	return func() { f.Close() }, nil
}
