//go:build linux && (386 || amd64 || arm || arm64 || loong64 || mips64le || mipsle || ppc64le || riscv64 || wasm)

package bpf

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startInPidNS starts cmd in a new PID namespace and returns the
// namespace's inode. Without root, the namespace is created inside a new
// user namespace by unshare(1), so the tests also run as an unprivileged
// user who only has CAP_BPF and CAP_PERFMON (go test -c; setcap
// cap_bpf,cap_perfmon+ep bpf.test): such a process is not dumpable, so it
// cannot write a child's uid_map itself.
func startInPidNS(tb testing.TB, cmd *exec.Cmd) uint32 {
	tb.Helper()
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
		if err := cmd.Start(); err != nil {
			tb.Fatal(err)
		}
		ino, err := PidNSInode(cmd.Process.Pid)
		if err != nil {
			tb.Fatal(err)
		}
		return ino
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		tb.Skipf("not root and no unshare(1): %v", err)
	}
	cmd.Args = append([]string{"unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child", "--", cmd.Path}, cmd.Args[1:]...)
	cmd.Path = unshare
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	// unshare's children are in the new namespace once it has unshared.
	self, err := PidNSInode(0)
	if err != nil {
		tb.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var st unix.Stat_t
		if err := unix.Stat("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/ns/pid_for_children", &st); err == nil && uint32(st.Ino) != self {
			return uint32(st.Ino)
		}
	}
	tb.Fatal("unshare did not create a PID namespace")
	return 0
}

// TestTraceChildInNewPidNS runs a shell in a fresh PID namespace, traces
// that namespace, and checks the child's opens and execs arrive with the
// right paths and results while the test process's own opens do not.
func TestTraceChildInNewPidNS(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "target-file")
	if err := os.WriteFile(target, []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "does-not-exist")
	own := filepath.Join(dir, "own-file")
	if err := os.WriteFile(own, nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// The child waits on stdin until the tracer is attached. Relative paths
	// check resolution against the working directory.
	cmd := exec.Command("/bin/sh", "-c",
		`read x; cat target-file >/dev/null; cat `+missing+` 2>/dev/null; mkdir sub; mv sub sub2; rmdir sub2; exec /bin/true`)
	cmd.Dir = dir
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	ino := startInPidNS(t, cmd)
	defer cmd.Process.Kill()
	self, _ := PidNSInode(0)
	if ino == self {
		t.Fatal("child is in the test's pid namespace")
	}
	tr, err := Start(ino)
	if err != nil {
		if errors.Is(err, ErrPermission) {
			t.Skipf("needs CAP_BPF and CAP_PERFMON: %v", err)
		}
		t.Fatal(err)
	}
	defer tr.Close()

	// Our own activity, which must not be reported.
	if f, err := os.Open(own); err == nil {
		f.Close()
	}
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	if f, err := os.Open(own); err == nil {
		f.Close()
	}

	var got []Event
	timeout := time.After(5 * time.Second)
	want := map[string]bool{"open-target": false, "open-missing": false, "exec-true": false, "exec-cat": false, "mkdir": false, "rename": false, "rmdir": false}
	done := func() bool {
		for _, v := range want {
			if !v {
				return false
			}
		}
		return true
	}
loop:
	for !done() {
		select {
		case e := <-tr.Events():
			got = append(got, e)
			if e.Tgid == uint32(os.Getpid()) || e.Path == own || e.AbsPath == own {
				t.Errorf("test process's own event reported: %+v", e)
			}
			switch {
			case e.Kind == KindOpen && e.Path == "target-file":
				if e.Ret < 0 {
					t.Errorf("open target-file failed: %+v", e)
				}
				if e.AbsPath != "" && e.AbsPath != target {
					t.Errorf("open target-file resolved to %q, want %q", e.AbsPath, target)
				}
				want["open-target"] = true
			case e.Kind == KindOpen && e.Path == missing:
				if e.Errno() != int(syscall.ENOENT) {
					t.Errorf("open missing: errno %d, want ENOENT: %+v", e.Errno(), e)
				}
				want["open-missing"] = true
			case e.Kind == KindExec && e.Path == "/bin/true":
				if !e.OK() {
					t.Errorf("exec /bin/true failed: %+v", e)
				}
				want["exec-true"] = true
			case e.Kind == KindExec && strings.HasSuffix(e.Path, "/cat") && e.OK():
				want["exec-cat"] = true
			case e.Kind == KindMkdir && e.Path == "sub" && e.OK():
				want["mkdir"] = true
			case e.Kind == KindRename && e.Path == "sub" && e.Path2 == "sub2" && e.OK():
				want["rename"] = true
			case e.Kind == KindRmdir && e.Path == "sub2" && e.OK():
				want["rmdir"] = true
			}
		case <-timeout:
			break loop
		}
	}
	if !done() {
		for _, e := range got {
			t.Logf("event: %+v", e)
		}
		t.Fatalf("missing events: %v", want)
	}
}

// TestRelativePathsFollowChdir: mkdir -p changes directory with chdir and
// fchdir between relative mkdirs, and its children inherit where they are.
// Each relative path must resolve against the directory the process was in
// at the call, even though the process has moved on (or exited) by the time
// the event is read.
func TestRelativePathsFollowChdir(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("/bin/sh", "-c", `read x; mkdir -p `+dir+`/a/b/c; cd `+dir+`/a && (cat b/../../none 2>/dev/null; true); cd /; mkdir -p `+dir+`/x/y`)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	ino := startInPidNS(t, cmd)
	defer cmd.Process.Kill()
	tr, err := Start(ino)
	if err != nil {
		if errors.Is(err, ErrPermission) {
			t.Skipf("needs CAP_BPF and CAP_PERFMON: %v", err)
		}
		t.Fatal(err)
	}
	defer tr.Close()
	stdin.Write([]byte("go\n"))
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	tr.Stop()
	mkdirs := map[string]bool{}
	opens := map[string]bool{}
	for e := range tr.Events() {
		switch e.Kind {
		case KindMkdir:
			if e.Ret == 0 {
				mkdirs[e.AbsPath] = true
			}
		case KindOpen:
			opens[e.AbsPath] = true
		case KindChdir, KindFork:
			t.Errorf("bookkeeping event delivered: %+v", e)
		}
	}
	for _, want := range []string{"a", "a/b", "a/b/c", "x", "x/y"} {
		if !mkdirs[filepath.Join(dir, want)] {
			t.Errorf("mkdir of %s/%s not resolved; successful mkdirs: %v", dir, want, mkdirs)
		}
	}
	if len(mkdirs) != 5 {
		t.Errorf("want exactly 5 successful mkdirs, got %v", mkdirs)
	}
	if !opens[filepath.Join(dir, "none")] {
		t.Errorf("a subshell's relative open was not resolved against the directory it inherited: %v", opens)
	}
}
