//go:build !linux

package tests

import "os"

// swapInto puts the fresh install tmp at dir; the old one, if any, is
// moved to tmp for the caller to remove.
func swapInto(tmp, dir string) error {
	if _, err := os.Stat(dir); err != nil {
		return os.Rename(tmp, dir)
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		return err
	}
	return os.Rename(old, tmp)
}
