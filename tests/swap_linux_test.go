package tests

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// swapInto puts the fresh install tmp at dir. An older cache (one that
// lacks an agent added since) is exchanged with it in one rename, so that
// another test process running an agent from dir never finds it missing
// or half removed; the old install is left at tmp for the caller to
// remove.
func swapInto(tmp, dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return os.Rename(tmp, dir)
	}
	if err := unix.Renameat2(unix.AT_FDCWD, tmp, unix.AT_FDCWD, dir, unix.RENAME_EXCHANGE); err != nil {
		return fmt.Errorf("exchanging %s with the new install: %w", dir, err)
	}
	return nil
}
