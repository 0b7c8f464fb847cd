package jail

import (
	"fmt"
	"io"
	"os"
	"sort"
	"syscall"
)

// ReadBounded reads a regular file of at most max bytes. It is opened
// without blocking, so a FIFO planted under the name cannot hang jail, and
// anything but a regular file is an error.
func ReadBounded(path string, max int64) ([]byte, error) { return readBounded(path, max, 0) }

// readBounded is ReadBounded opened with flags added (O_NOFOLLOW, for a
// file that must not be a symlink).
func readBounded(path string, max int64, flags int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|flags, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

// maxEnvFile bounds the .env files jail rewrites; a larger one is shown
// inside as empty rather than risk passing a secret through.
const maxEnvFile = 1 << 20

// ReadEnvFile is the content of a .env file to mask, or nothing when it
// cannot be read safely: only a regular file of at most maxEnvFile bytes
// is read, opened without following a last symlink (the plan resolved it)
// and without blocking, so that a name leading to a FIFO, a terminal or a
// device shows an empty file instead of hanging or reading a stream.
func ReadEnvFile(path string) []byte {
	for _, pseudo := range []string{"/proc", "/dev", "/sys"} {
		if Under(path, pseudo) {
			return nil // another process's environment, a device: never a .env
		}
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxEnvFile {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEnvFile+1))
	if err != nil || len(b) > maxEnvFile {
		return nil
	}
	return b
}

// EnvFileSecrets are the names of the secrets each .env file of files
// holds (the values that MaskEnvFile replaces), by file, for `jail plan`:
// read while gathering facts, bounded like the copies, never keeping a
// value.
func EnvFileSecrets(pol *Policy, files []string) map[string][]string {
	forced := map[string]bool{}
	for n := range pol.Secrets.Env {
		forced[n] = true
	}
	out := map[string][]string{}
	for _, src := range files {
		_, found := MaskEnvFile(ReadEnvFile(src), forced, func(name, _ string) (string, []SecretPiece) {
			return "", []SecretPiece{{Name: name}}
		})
		var names []string
		for _, fv := range found {
			names = append(names, fv.Name)
		}
		if len(names) > 0 {
			sort.Strings(names)
			out[src] = Union(nil, names)
		}
	}
	return out
}
