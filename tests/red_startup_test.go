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
	// A stopped process and one being traced, neither of which runs
	// again unless something continues it.
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
