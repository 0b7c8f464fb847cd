package tests

import (
	"encoding/json"
	"runtime"
	"strings"
	"testing"
)

// ptraceLikePy tries, from inside the jail, every way of reaching into
// another process that is not ptrace itself: taking init's open files
// (pidfd_getfd, /proc/1/fd), reading or writing init's memory
// (process_vm_readv, /proc/1/mem), reading its environment and the
// directories it holds, and writing to any process's memory through
// /proc/PID/mem, its own included. It prints one JSON object: attack ->
// "ok" (with what was obtained) or the errno name. Syscall numbers are
// x86_64's.
const ptraceLikePy = `
import ctypes, errno, json, os, signal, subprocess, sys, time

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.syscall.argtypes = [ctypes.c_long] + [ctypes.c_ulong] * 6
libc.prctl.restype = ctypes.c_int
libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
SYS_process_vm_readv, SYS_process_vm_writev, SYS_pidfd_getfd = 310, 311, 438

def sc(nr, *args):
    args = list(args) + [0] * (6 - len(args))
    return libc.syscall(nr, *[ctypes.c_ulong(a & 0xffffffffffffffff) for a in args])

def err(e=None):
    e = ctypes.get_errno() if e is None else e
    return errno.errorcode.get(e, str(e))

def attempt(f):
    try:
        return f()
    except OSError as e:
        return err(e.errno)

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def pidfd_getfd(pid):
    pidfd = os.pidfd_open(pid)
    got, errs = [], set()
    for fd in range(0, 64):
        r = sc(SYS_pidfd_getfd, pidfd, fd, 0)
        if r >= 0:
            got.append("%d->%s" % (fd, os.readlink("/proc/self/fd/%d" % r)))
            os.close(r)
        else:
            errs.add(err())
    if got:
        return "ok:" + ",".join(got)
    errs.discard("EBADF")  # no such descriptor in the target
    return ",".join(sorted(errs)) or "EBADF"

def vm(nr, pid, addr):
    buf = ctypes.create_string_buffer(16)
    l = iovec(ctypes.addressof(buf), 16); r = iovec(addr, 16)
    n = sc(nr, pid, ctypes.addressof(l), 1, ctypes.addressof(r), 1, 0)
    return "ok:%d" % n if n >= 0 else err()

def init_stack():
    # An address that is mapped in init: the start of its stack, from
    # /proc/1/stat (field 28), or a typical Go heap address when that is
    # hidden; either way the call must fail before looking.
    try:
        return int(open("/proc/1/stat").read().rsplit(")", 1)[1].split()[25]) or 0xc000000000
    except Exception:
        return 0xc000000000

def open_mem(pid, flags):
    fd = os.open("/proc/%s/mem" % pid, flags)
    os.close(fd)
    return "ok"

def read_file(path):
    data = open(path, "rb").read()
    return "ok:%d bytes" % len(data)

def list_fds(pid):
    names = os.listdir("/proc/%s/fd" % pid)
    links = []
    for n in names:
        try:
            links.append(os.readlink("/proc/%s/fd/%s" % (pid, n)))
        except OSError as e:
            pass
    return "listed:%d,links:%d" % (len(names), len(links))

def open_fds(pid):
    got = []
    for n in range(0, 64):
        try:
            fd = os.open("/proc/%s/fd/%d" % (pid, n), os.O_RDONLY | os.O_NONBLOCK)
            got.append(str(n)); os.close(fd)
        except OSError as e:
            if e.errno != errno.ENOENT:
                last = err(e.errno)
    return "ok:" + ",".join(got) if got else "none"

sib = subprocess.Popen(["sleep", "30"])
time.sleep(0.1)
here = ctypes.create_string_buffer(b"jail-test-buffer")
res = dict(
    pidfd_getfd_init=attempt(lambda: pidfd_getfd(1)),
    pidfd_getfd_sibling=attempt(lambda: pidfd_getfd(sib.pid)),
    process_vm_readv_init=vm(SYS_process_vm_readv, 1, init_stack()),
    process_vm_writev_init=vm(SYS_process_vm_writev, 1, init_stack()),
    process_vm_readv_self=vm(SYS_process_vm_readv, os.getpid(), ctypes.addressof(here)),
    init_mem_read=attempt(lambda: open_mem(1, os.O_RDONLY)),
    init_mem_write=attempt(lambda: open_mem(1, os.O_RDWR)),
    sibling_mem_write=attempt(lambda: open_mem(sib.pid, os.O_WRONLY)),
    self_mem_write=attempt(lambda: open_mem("self", os.O_RDWR)),
    init_environ=attempt(lambda: read_file("/proc/1/environ")),
    init_fd_links=attempt(lambda: list_fds(1)),
    init_fd_open=attempt(lambda: open_fds(1)),
    init_cwd=attempt(lambda: "ok:" + os.readlink("/proc/1/cwd")),
    init_root=attempt(lambda: "ok:%d entries" % len(os.listdir("/proc/1/root/"))),
    # What must keep working.
    init_cmdline=attempt(lambda: read_file("/proc/1/cmdline")),
    init_status=attempt(lambda: read_file("/proc/1/status")),
    self_environ=attempt(lambda: read_file("/proc/self/environ")),
    self_fds=attempt(lambda: list_fds("self")),
    self_mem_read=attempt(lambda: open_mem("self", os.O_RDONLY)),
    dumpable=str(libc.prctl(3, 0, 0, 0, 0)),  # PR_GET_DUMPABLE
)
sib.kill()
print(json.dumps(res))
`

// Inside the jail nothing reaches into init or another process the way
// ptrace would: pidfd_getfd is refused by seccomp, init is not dumpable (so
// its /proc/1/mem, environ, fd links and directories are closed to the
// jailed command, which lacks CAP_SYS_PTRACE), process_vm_readv/writev are
// refused, and no /proc/PID/mem opens for writing (Landlock: /proc is
// read-only). The command itself stays dumpable and its own /proc works.
func TestNoPtraceEquivalents(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the attack script uses x86_64 syscall numbers; this is %s", runtime.GOARCH)
	}
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/ptrace.py", ptraceLikePy, 0o644)
		r := s.Jail("--", "python3", "ptrace.py")
		var got map[string]string
		if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &got); err != nil || r.Code != 0 {
			t.Fatalf("the attack script: %v\n%s", err, r)
		}
		t.Logf("inside: %v", got)
		want := func(name string, ok func(string) bool, what string) {
			t.Helper()
			if v, present := got[name]; !present || !ok(v) {
				t.Errorf("%s: got %q, want %s", name, v, what)
			}
		}
		refused := func(v string) bool { return v == "EPERM" || v == "EACCES" }
		want("pidfd_getfd_init", is("EPERM"), "EPERM (seccomp) and no descriptor of init's")
		want("pidfd_getfd_sibling", is("EPERM"), "EPERM (seccomp) and no descriptor of a sibling's")
		want("process_vm_readv_init", is("EPERM"), "EPERM")
		want("process_vm_writev_init", is("EPERM"), "EPERM")
		want("process_vm_readv_self", is("EPERM"), "EPERM (the call is refused outright)")
		want("init_mem_read", refused, "EACCES (init is not dumpable)")
		want("init_mem_write", refused, "EACCES")
		want("sibling_mem_write", refused, "EACCES (Landlock: /proc is read-only)")
		want("self_mem_write", refused, "EACCES (Landlock: /proc is read-only)")
		want("init_environ", refused, "EACCES (init is not dumpable)")
		want("init_cwd", refused, "EACCES (init is not dumpable)")
		want("init_root", refused, "EACCES (init is not dumpable)")
		want("init_fd_open", func(v string) bool { return v == "none" || refused(v) }, "no descriptor of init's opened through /proc/1/fd")
		// Not dumpable, init's /proc files belong to the namespace's root:
		// the user runner cannot even list /proc/1/fd; root in the jail,
		// who owns it, sees the numbers but not where they lead.
		if s.R.UID == 0 {
			want("init_fd_links", func(v string) bool { return refused(v) || strings.HasSuffix(v, ",links:0") }, "no link of /proc/1/fd readable")
		} else {
			want("init_fd_links", refused, "EACCES listing /proc/1/fd")
		}
		// Controls: the command's own /proc, init's public entries.
		want("init_cmdline", func(v string) bool { return strings.HasPrefix(v, "ok:") }, "readable (ps reads it)")
		want("init_status", func(v string) bool { return strings.HasPrefix(v, "ok:") }, "readable")
		want("self_environ", func(v string) bool { return strings.HasPrefix(v, "ok:") }, "readable by the command itself")
		want("self_fds", func(v string) bool { return strings.HasPrefix(v, "listed:") && !strings.HasSuffix(v, ",links:0") }, "the command's own fds listed with their links")
		want("self_mem_read", is("ok"), "ok (reading one's own memory is not reaching into another process)")
		want("dumpable", is("1"), "1: the command is dumpable again after its execve")

		// Control on the host: the same script as the same user, outside
		// the jail, takes its child's descriptors and writes its memory,
		// so the refusals above are the jail's.
		out, code := s.HostOut(s.Project, "python3", "ptrace.py")
		var host map[string]string
		if err := json.Unmarshal([]byte(strings.TrimSpace(out)), &host); err != nil || code != 0 {
			t.Fatalf("the attack script on the host: %v\n%s", err, out)
		}
		for _, name := range []string{"pidfd_getfd_sibling", "sibling_mem_write", "self_mem_write", "process_vm_readv_self"} {
			if !strings.HasPrefix(host[name], "ok") {
				t.Errorf("control: %s fails on the host too (%q): the jailed refusal proves nothing", name, host[name])
			}
		}
	})
}

// Writing through /proc still reaches what /proc links to: a pipe or the
// terminal behind /dev/stdout, /dev/stderr, /proc/self/fd/N and bash's
// process substitution; listing /proc/self/fd works.
func TestProcReadOnlyKeepsStdio(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.Jail("--", "bash", "-c", `
			(echo via-dev-stdout > /dev/stdout) | cat
			(echo via-tee | tee /dev/stderr >/dev/null) 2>&1 | cat
			(echo via-proc-fd > /proc/self/fd/1) | cat
			(echo via-append >> /dev/stdout) | cat
			cat <(echo via-subst)
			while read l; do echo "$l"; done < <(echo via-subst-in)
			echo via-fd-arg > >(cat); sleep 0.2
			ls /proc/self/fd >/dev/null && echo ls-fd-ok
			echo via-python | python3 -c 'import sys; open("/dev/stdout", "w").write(sys.stdin.read())' | cat`)
		if r.Code != 0 {
			t.Errorf("exit %d\n%s", r.Code, r)
		}
		for _, w := range []string{"via-dev-stdout", "via-tee", "via-proc-fd", "via-append", "via-subst", "via-subst-in", "via-fd-arg", "ls-fd-ok", "via-python"} {
			if !strings.Contains(r.Stdout, w+"\n") {
				t.Errorf("%s missing from the output\n%s", w, r)
			}
		}
	})
}
