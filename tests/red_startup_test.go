package tests

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The start-up and clean-up attacked from inside the jail. jail returns
// the placeholders that hold the protected paths missing at start as soon
// as init says nothing of the jail is left: a process that outlives the
// command, whatever way it found, and writes a protected path after that
// would create it on the host, where the next shell, editor or agent
// would read it.

// survivorPy is what a survivor does once it runs: over and over, create
// protected paths that placeholders hold (and .git/hooks, which a mount
// protects), and leave a marker when one of them worked.
const survivorPy = `
import os, signal, sys, time
for s in range(1, 65):
    try:
        signal.signal(s, signal.SIG_IGN)
    except (OSError, ValueError):
        pass
if sys.argv[1:] != ["quiet"]:
    open("started", "w").close()
paths = [".envrc", ".mcp.json", ".npmrc", ".vscode/x", ".idea/x", ".git/hooks/pre-commit"]
while True:
    for p in paths:
        try:
            if p.endswith("/x"):
                os.makedirs(p)
            else:
                with open(p, "x") as f:
                    f.write("#!/bin/sh\ntouch /tmp/pwned\n")
            open("escaped", "a").write(p + "\n")
        except OSError:
            pass
    time.sleep(0.001)
`

// protectedBySurvivors are the paths survivorPy creates, none of which
// may appear on the host.
var protectedBySurvivors = []string{".envrc", ".mcp.json", ".npmrc", ".vscode", ".idea", ".git/hooks/pre-commit"}

// survivorWays start survivorPy so that it outlives the command, each in
// its own way.
var survivorWays = map[string]string{
	// A double fork and a session of its own.
	"double-fork": `(setsid python3 survivor.py </dev/null >/dev/null 2>&1 &) &`,
	// A subreaper whose orphaned grandchildren come back to it, not to
	// init.
	"subreaper": `python3 -c '
import ctypes, os, sys
ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
if os.fork() == 0:
    if os.fork() == 0:
        os.execvp("python3", ["python3", "survivor.py"])
    os._exit(0)
os.setsid()
os.execvp("python3", ["python3", "survivor.py", "quiet"])
' </dev/null >/dev/null 2>&1 &`,
	// A thread group whose leader exits (not the group): the leader is
	// a zombie its parent cannot reap while the threads run.
	"leader-exits": `python3 -c '
import ctypes, os, threading, runpy
t = threading.Thread(target=lambda: runpy.run_path("survivor.py"))
t.start()
ctypes.CDLL(None).syscall(60, 0)  # exit(2): this thread only
' </dev/null >/dev/null 2>&1 &`,
	// A process that forks and exits over and over, so that it is never
	// the process a signal was sent to.
	"hopper": `python3 -c '
import os, runpy
os.setsid()
if os.fork() == 0:
    while True:
        if os.fork():
            os._exit(0)
        try:
            open(".envrc", "x").write("hop")
            open("escaped", "a").write(".envrc\n")
        except OSError:
            pass
runpy.run_path("survivor.py")
' </dev/null >/dev/null 2>&1 &`,
	// A process waiting to open a FIFO for writing: the host opens the
	// FIFO for reading after the jail, which would wake it.
	"fifo-open": `mkfifo wake; setsid sh -c 'exec 3>wake; python3 survivor.py' </dev/null >/dev/null 2>&1 &
python3 survivor.py </dev/null >/dev/null 2>&1 &`,
	// A new user and PID namespace, when the jail allows one: the
	// survivor is that namespace's init.
	"new-pid-ns": `(unshare -Upf --kill-child= python3 survivor.py 2>/dev/null || setsid python3 survivor.py) </dev/null >/dev/null 2>&1 &`,
	// Started by posix_spawn, which glibc makes with a vfork-like clone
	// (the parent waits for the child's exec).
	"vfork": `python3 -c '
import os, shutil
os.setsid()
os.posix_spawn(shutil.which("python3"), ["python3", "survivor.py"], dict(os.environ))
' </dev/null >/dev/null 2>&1 &`,
	// A parent that never reaps its exited child: the zombie, whose cwd
	// was a protected directory, stays in the process table.
	"zombie-parent": `python3 -c '
import os, runpy
os.setsid()
if os.fork() == 0:
    os.chdir(".git/hooks")
    os._exit(0)
runpy.run_path("survivor.py")
' </dev/null >/dev/null 2>&1 &`,
	// A stopped process, which runs again only if something continues
	// it, and a second survivor beside it.
	"stopped": `setsid python3 survivor.py </dev/null >/dev/null 2>&1 &
p=$!; while [ ! -e started ]; do sleep 0.01; done; kill -STOP $p 2>/dev/null; rm started
setsid python3 survivor.py </dev/null >/dev/null 2>&1 &`,
}

// TestSurvivorsCannotWriteAfterTheCleanup: whatever way a process
// outlives the command, nothing of it writes into the project on the host
// once jail has returned the placeholders: no protected path appears,
// then or later (checked after the host has woken what might be waiting),
// and the project on the host is as it was.
func TestSurvivorsCannotWriteAfterTheCleanup(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		for name, way := range survivorWays {
			t.Run(name, func(t *testing.T) {
				for _, p := range append([]string{"wake", "escaped", "started"}, protectedBySurvivors...) {
					os.RemoveAll(filepath.Join(s.Project, p)) // what an earlier subtest's survivor made
				}
				s.WriteFile(s.Project+"/survivor.py", survivorPy, 0o644)
				before := listTree(t, s.Project)
				r := s.Jail("--", "sh", "-c", way+"\nfor i in $(seq 500); do [ -e started ] && break; sleep 0.01; done; [ -e started ] || echo never started; rm -f started; sleep 0.05; exit 7")
				if r.Code != 7 || strings.Contains(r.Stdout, "never started") {
					t.Fatalf("want the command's exit code 7 with the survivor started:\n%s", r)
				}
				if _, err := os.Lstat(s.Project + "/wake"); err == nil {
					f, err := os.OpenFile(s.Project+"/wake", os.O_RDONLY|syscall.O_NONBLOCK, 0)
					if err != nil {
						t.Fatalf("opening the FIFO on the host: %v", err)
					}
					defer f.Close()
				}
				time.Sleep(400 * time.Millisecond) // what a survivor would do, it would do now
				if b, err := os.ReadFile(s.Project + "/escaped"); err == nil {
					t.Errorf("a process outlived the jail and wrote %q on the host", b)
				}
				for _, p := range protectedBySurvivors {
					if _, err := os.Lstat(filepath.Join(s.Project, p)); err == nil {
						t.Errorf("%s exists on the host after the jail exited", p)
					}
				}
				os.RemoveAll(s.Project + "/wake")
				sameTree(t, "after the jail with a survivor "+name, withoutWake(before), withoutWake(listTree(t, s.Project)))
			})
		}
	})
}

// withoutWake is a tree listing without the FIFO the fifo-open survivor
// makes (the jail may make it; it is not a protected path).
func withoutWake(list []string) []string {
	var out []string
	for _, l := range list {
		if !strings.Contains(l, "wake") {
			out = append(out, l)
		}
	}
	return out
}

// poolAttackSh tries, from inside the jail, to put something into the
// placeholder pool (which the next jail takes placeholders from) and to
// give a placeholder a second name that would follow it there. It prints
// "##NAME=ok" or "##NAME=no".
const poolAttackSh = `
pool=$HOME/.local/state/jail/placeholders/pool
try() { n=$1; shift; if "$@" 2>/dev/null; then echo "##$n=ok"; else echo "##$n=no"; fi; }
try pool-listed ls "$pool"
try pool-dir mkdir "$pool/d-planted"
try pool-file sh -c 'printf "" > "$0/f-e3b0c44298fc-planted"' "$pool"
try pool-key ln "$HOME/.ssh/id_rsa" "$pool/f-e3b0c44298fc-key"
try link-control sh -c 'ln README.md control-link && rm control-link'
try link-envrc ln .envrc linked-envrc
try link-npmrc ln .npmrc linked-npmrc
try link-proc python3 -c '
import os
fd = os.open(".mcp.json", os.O_RDONLY)
os.link("/proc/self/fd/%d" % fd, "linked-mcp", follow_symlinks=True)
'
try link-at python3 -c '
import ctypes, os
fd = os.open(".envrc", os.O_PATH)
libc = ctypes.CDLL(None, use_errno=True)
if libc.linkat(fd, b"", -100, b"linked-empty", 0x1000) != 0:  # AT_EMPTY_PATH
    raise OSError(ctypes.get_errno(), "linkat")
'
`

// TestPlaceholderPoolOutOfReach: the pool the placeholders come from and
// go back to is out of the jail's reach, and no placeholder can be given
// a second name from inside (a name the jail could write through once the
// inode holds another project's protected path). After the jail, every
// spare in the pool is an empty directory or a file of one name, none is
// the jail's, and the secret still has one name.
func TestPlaceholderPoolOutOfReach(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		if r := s.Jail("--", "true"); r.Code != 0 {
			t.Fatalf("a first run to fill the pool failed:\n%s", r)
		}
		pool := s.Home + "/.local/state/jail/placeholders/pool"
		if ents, err := os.ReadDir(pool); err != nil || len(ents) == 0 {
			t.Fatalf("control: the first run left no spare in %s: %v", pool, err)
		}
		r := s.Sh(poolAttackSh)
		if r.Code != 0 {
			t.Fatalf("the attack script failed:\n%s", r)
		}
		got := kvs(r)
		if got["link-control"] != "ok" {
			t.Errorf("control: a project file could not be given a second name inside the jail:\n%s", r)
		}
		for _, k := range []string{"pool-listed", "pool-dir", "pool-file", "pool-key", "link-envrc", "link-npmrc", "link-proc", "link-at"} {
			if got[k] != "no" {
				t.Errorf("%s from inside the jail: got %q, want it refused\n%s", k, got[k], r)
			}
		}
		ents, err := os.ReadDir(pool)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			var st syscall.Stat_t
			p := filepath.Join(pool, e.Name())
			if err := syscall.Lstat(p, &st); err != nil {
				t.Fatal(err)
			}
			switch {
			case strings.Contains(e.Name(), "planted") || strings.Contains(e.Name(), "key"):
				t.Errorf("the jail put %s in the pool", e.Name())
			case st.Mode&syscall.S_IFMT == syscall.S_IFDIR:
				if sub, _ := os.ReadDir(p); len(sub) > 0 {
					t.Errorf("the spare directory %s is not empty: %v", e.Name(), sub)
				}
			case st.Mode&syscall.S_IFMT != syscall.S_IFREG || st.Nlink != 1:
				t.Errorf("the spare %s is not a file of one name (mode %o, %d names)", e.Name(), st.Mode, st.Nlink)
			}
		}
		for _, l := range listTree(t, s.Project) {
			if strings.HasPrefix(l, "linked") {
				t.Errorf("%s exists in the project on the host", l)
			}
		}
		var st syscall.Stat_t
		if err := syscall.Stat(s.Home+"/.ssh/id_rsa", &st); err != nil || st.Nlink != 1 {
			t.Errorf("the secret has %d names after the jail (%v)", st.Nlink, err)
		}
	})
}

// firstThingSh is the command's first work: the filters it runs under,
// a protected path held by a placeholder, a directory beside the project
// (the host must not see it), and a connection to an address no rule
// names, which only the capture accepts (without it there is no route
// out: curl's exit 7) and the proxy refuses.
const firstThingSh = `
while read -r k v; do case $k in Seccomp:|NoNewPrivs:) echo "##${k%:}=$v";; esac; done </proc/self/status
if (: > .envrc) 2>/dev/null; then echo "##envrc=written"; else echo "##envrc=refused"; fi
if mkdir ../outside 2>/dev/null; then echo "##outside=made"; else echo "##outside=refused"; fi
curl -s -o /dev/null --max-time 5 http://192.0.2.55/first; echo "##capture=$?"
`

// TestCommandStartsFullyJailed: the placeholders are made, and the proxy
// started, while bubblewrap builds the jail; init mounts and runs nothing
// before the host's go-ahead, and the command only once Landlock, seccomp,
// the placeholders' mounts and the capture are in place. Its first work,
// in run after run, finds every one of them.
func TestCommandStartsFullyJailed(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		n := setupNet(t, s, "")
		for i := 0; i < 4; i++ {
			r := s.Sh(unsetProxy + firstThingSh)
			got := kvs(r)
			want := map[string]string{"Seccomp": "2", "NoNewPrivs": "1", "envrc": "refused"}
			for k, v := range want {
				if got[k] != v {
					t.Errorf("run %d: %s %q, want %q\n%s", i, k, got[k], v, r)
				}
			}
			if c := got["capture"]; c == "" || c == "0" || c == "7" {
				t.Errorf("run %d: curl to an address no rule names exited %q: not captured and refused\n%s", i, c, r)
			}
			if !strings.Contains(r.Stderr, "192.0.2.55") {
				t.Errorf("run %d: the refusal of the first connection is not reported\n%s", i, r)
			}
		}
		if _, err := os.Lstat(s.Base + "/outside"); err == nil {
			t.Errorf("the command made a directory beside the project on the host")
		}
		if n.Canary.Conns() > 0 || len(n.Trap.Paths()) > 0 {
			t.Errorf("a server on the host saw the first connection")
		}
	})
}

// TestPlaceholderFailureRunsNothing: the placeholders may be made while
// bubblewrap starts, and init waits for them. When they cannot be
// recorded and made (here the journal's directory is a file), the command
// never runs: jail exits 125 with one line saying why and how to fix it,
// and the project is as it was.
func TestPlaceholderFailureRunsNothing(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Home+"/.local/state/jail/placeholders", "not a directory\n", 0o644)
		before := listTree(t, s.Project)
		r := s.Jail("--", "sh", "-c", "touch ran; echo ran")
		if r.Code != 125 || strings.Contains(r.Stdout, "ran") {
			t.Fatalf("want exit 125 and the command not run:\n%s", r)
		}
		if l := lines(r.Stderr); len(l) != 1 || !strings.HasPrefix(l[0], "jail: ") || !strings.Contains(l[0], "placeholder") {
			t.Errorf("want one line naming the placeholders on stderr:\n%s", r)
		}
		if _, err := os.Lstat(s.Project + "/ran"); err == nil {
			t.Errorf("the command ran on the host's project")
		}
		sameTree(t, "after placeholders failed", before, listTree(t, s.Project))
	})
}

// speakForInitPy tries to write init's report to the host itself (the
// status pipe says what the host believes of the command; a line of its
// own, such as an early "gone", must not reach it) and to send signals
// through init's control pipe. It tries init's descriptors through
// /proc/1/fd and pidfd_getfd, then keeps creating protected paths for a
// while. It prints "##NAME=RESULT".
const speakForInitPy = `
import ctypes, errno, os, time
libc = ctypes.CDLL(None, use_errno=True)
opened, taken = [], []
for n in range(3, 16):
    try:
        fd = os.open("/proc/1/fd/%d" % n, os.O_WRONLY | os.O_NONBLOCK)
        os.write(fd, b'{"gone":true}\n')
        opened.append(n)
    except OSError as e:
        pass
try:
    pidfd = os.pidfd_open(1)
    for n in range(3, 16):
        fd = libc.syscall(438, pidfd, n, 0)  # pidfd_getfd
        if fd >= 0:
            os.write(fd, b'{"gone":true}\n')
            taken.append(n)
except OSError:
    pass
print("##proc-fd=%s" % (opened or "none"))
print("##pidfd-getfd=%s" % (taken or "none"), flush=True)
end = time.time() + 1.5
while time.time() < end:
    for p in (".envrc", ".mcp.json", ".npmrc"):
        try:
            open(p, "x").close()
            open("escaped", "a").write(p + "\n")
        except OSError:
            pass
    time.sleep(0.005)
`

// TestCommandCannotSpeakForInit: init tells the host on its status pipe
// that nothing of the jail is left, and the host then returns the
// placeholders. The command cannot reach that pipe (init is not dumpable:
// neither /proc/1/fd nor pidfd_getfd opens its descriptors), so it cannot
// say so early and then create the protected paths on the host.
func TestCommandCannotSpeakForInit(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/speak.py", speakForInitPy, 0o644)
		r := s.Jail("--", "python3", "speak.py")
		if r.Code != 0 {
			t.Fatalf("the script failed:\n%s", r)
		}
		wantKV(t, r, "proc-fd", is("none"), "none of init's descriptors opened through /proc/1/fd")
		wantKV(t, r, "pidfd-getfd", is("none"), "none of init's descriptors taken with pidfd_getfd")
		if b, err := os.ReadFile(s.Project + "/escaped"); err == nil {
			t.Errorf("the command created protected paths on the host while it ran: %q", b)
		}
		for _, p := range []string{".envrc", ".mcp.json", ".npmrc"} {
			if _, err := os.Lstat(filepath.Join(s.Project, p)); err == nil {
				t.Errorf("%s exists on the host after the jail", p)
			}
		}
	})
}
