package inside

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// overlayHome shows the real home at home through an overlay whose writes
// stay in memory (learning and watch modes), keeping every mount
// bubblewrap made below home (masks, the project, allowed paths) on top of
// it.
//
// It runs in init's own mount namespace (newMountNamespace).
func overlayHome(home string) error {
	fail := func(what string, err error) error {
		return fmt.Errorf("init: learning-mode home overlay: %s: %w", what, err)
	}
	// Detached copies of what bubblewrap mounted below home, taken before
	// the overlay covers them.
	points, err := submounts(home)
	if err != nil {
		return fail("reading mountinfo", err)
	}
	type tree struct {
		path string
		fd   int
	}
	var trees []tree
	defer func() {
		for _, t := range trees {
			unix.Close(t.fd)
		}
	}()
	for _, p := range points {
		fd, err := unix.OpenTree(unix.AT_FDCWD, p, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE)
		if err != nil {
			return fail("copying the mount at "+p, err)
		}
		trees = append(trees, tree{p, fd})
	}

	if err := unix.Mount("tmpfs", OverlayWork, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fail("mounting the upper layer", err)
	}
	upper, work := OverlayWork+"/upper", OverlayWork+"/work"
	if err := errors.Join(os.Mkdir(upper, 0o755), os.Mkdir(work, 0o700)); err != nil {
		return fail("creating the upper layer", err)
	}
	// The upper layer's root takes the home's owner and mode, so the
	// merged home looks like the real one.
	if st, err := os.Stat(OverlayLower); err == nil {
		if sys, ok := st.Sys().(*unix.Stat_t); ok {
			os.Chown(upper, int(sys.Uid), int(sys.Gid))
		}
		os.Chmod(upper, st.Mode().Perm())
	}
	opts := "lowerdir=" + OverlayLower + ",upperdir=" + upper + ",workdir=" + work + ",userxattr"
	if err := unix.Mount("overlay", home, "overlay", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
		return fail("mounting the overlay (needs Linux 5.11 or newer)", err)
	}
	for _, t := range trees {
		if err := ensureMountpoint(t.path, t.fd); err != nil {
			return fail("preparing "+t.path, err)
		}
		if err := unix.MoveMount(t.fd, "", unix.AT_FDCWD, t.path, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			return fail("putting back the mount at "+t.path, err)
		}
	}
	// The real home stays reachable only through the overlay, below the
	// masks: cover the lower bind (it is locked, it cannot be unmounted)
	// and detach the upper layer's tmpfs (the overlay keeps its own copy).
	if err := unix.Mount("tmpfs", OverlayLower, "tmpfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV, "mode=0555"); err != nil {
		return fail("covering the real home", err)
	}
	if err := unix.Unmount(OverlayWork, unix.MNT_DETACH); err != nil {
		return fail("detaching the upper layer", err)
	}
	return nil
}

// newMountNamespace gives init a mount namespace of its own. bubblewrap
// runs init in a user namespace nested below the one that owns the jail's
// mount namespace (it does so for --dev and --disable-userns), so the
// capabilities it was given for its mounts (CAP_SYS_ADMIN, …) count only
// in a mount namespace init makes. The mounts it inherits are locked: they
// can be covered, never removed, so nothing bubblewrap masked can be
// uncovered from inside. Only this thread (and the command forked from
// it) enters the new namespace.
func newMountNamespace() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("init: new mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("init: making mounts private: %w", err)
	}
	return nil
}

// applyMounts makes the spec's mounts, in order: each tree bound onto
// itself with what is mounted below it (a pin keeps bubblewrap's masks
// and read-only binds inside it), read-only where asked. Three calls a
// mount, against bubblewrap's reading of the whole mount table for each.
func applyMounts(mounts []Mount) error {
	for _, m := range mounts {
		if err := applyMount(m); err != nil {
			return fmt.Errorf("init: mounting %s: %w", m.Path, err)
		}
	}
	return nil
}

func applyMount(m Mount) error {
	fd, err := unix.OpenTree(unix.AT_FDCWD, m.Path, unix.OPEN_TREE_CLONE|unix.OPEN_TREE_CLOEXEC|unix.AT_RECURSIVE|unix.AT_SYMLINK_NOFOLLOW)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if m.ReadOnly {
		attr := &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY | unix.MOUNT_ATTR_NOSUID | unix.MOUNT_ATTR_NODEV}
		if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, attr); err != nil {
			return err
		}
	}
	return unix.MoveMount(fd, "", unix.AT_FDCWD, m.Path, unix.MOVE_MOUNT_F_EMPTY_PATH)
}

// ensureMountpoint creates the file or directory a mount goes back onto
// when the overlay lacks it (bubblewrap created it in the throwaway home).
func ensureMountpoint(path string, fd int) error {
	if _, err := os.Lstat(path); err == nil {
		return nil
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return os.Mkdir(path, 0o755)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// submounts lists the outermost mount points strictly below dir, in mount
// order. Each is copied with its own submounts.
func submounts(dir string) ([]string, error) {
	f, err := os.Open("/proc/thread-self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var all []string
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMountinfo(fields[4])
		if strings.HasPrefix(mp, dir+"/") && !seen[mp] {
			seen[mp] = true
			all = append(all, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range all {
		inner := false
		for _, q := range all {
			if strings.HasPrefix(p, q+"/") {
				inner = true
				break
			}
		}
		if !inner {
			out = append(out, p)
		}
	}
	return out, nil
}

// unescapeMountinfo decodes the octal escapes (\040 for a space) of a
// mountinfo path.
func unescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+4 <= len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// dropCapabilities empties the capability sets and bounding set of every
// thread of init (the command is forked from this one; the Go runtime's
// other threads must not keep what bubblewrap left for init's mounts),
// so that none survives into the command, even as root.
func dropCapabilities() error {
	for c := 0; c <= unix.CAP_LAST_CAP; c++ {
		if in, _ := unix.PrctlRetInt(unix.PR_CAPBSET_READ, uintptr(c), 0, 0, 0); in != 1 {
			continue
		}
		if err := allThreads(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0); err != nil && err != unix.EINVAL {
			return fmt.Errorf("init: dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := allThreads(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0); err != nil && err != unix.EINVAL {
		return fmt.Errorf("init: clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := allThreads(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); err != nil {
		return fmt.Errorf("init: dropping capabilities: %w", err)
	}
	return nil
}

// allThreads makes a system call on every thread of the process (init is
// built without cgo, where the runtime can); built with cgo, on this
// thread only.
func allThreads(trap, a1, a2, a3 uintptr) error {
	_, _, errno := syscall.AllThreadsSyscall(trap, a1, a2, a3)
	if errno == syscall.ENOTSUP {
		_, _, errno = syscall.RawSyscall(trap, a1, a2, a3)
	}
	if errno != 0 {
		return errno
	}
	return nil
}
