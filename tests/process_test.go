package tests

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// attacksPy makes each attack in a forked child (so a SIGSYS kill is seen
// and one attack cannot disturb the next) and prints one JSON object:
// attack name -> "ok", an errno name, or "killed:SIGNAL". Syscall numbers
// are x86_64's. The arguments are chosen so that, without a seccomp filter,
// the kernel's answer differs from the filter's EPERM/ENOSYS (a path that
// does not exist, an invalid command, a harmless success).
const attacksPy = `
import ctypes, errno, json, mmap, os, pty, signal, struct, sys

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
libc.syscall.argtypes = [ctypes.c_long] + [ctypes.c_ulong] * 6
M = 0xffffffffffffffff

NR = dict(ioctl=16, getpid=39, socket=41, socketpair=53, clone=56, ptrace=101, pivot_root=155, chroot=161,
          mount=165, umount2=166, init_module=175, kexec_load=246, add_key=248, keyctl=250, unshare=272,
          perf_event_open=298, name_to_handle_at=303, open_by_handle_at=304, setns=308, process_vm_readv=310,
          bpf=321, userfaultfd=323, io_uring_setup=425, open_tree=428, move_mount=429, fsopen=430, clone3=435)

def err():
    e = ctypes.get_errno()
    return errno.errorcode.get(e, str(e))

def raw(nr, *args):
    args = list(args) + [0] * (6 - len(args))
    r = libc.syscall(nr, *[ctypes.c_ulong(a & M) for a in args])
    return "ok" if r >= 0 else err()

def sc(name, *args):
    return raw(NR[name], *args)

def cstr(b):
    buf = ctypes.create_string_buffer(b)
    keep.append(buf)
    return ctypes.addressof(buf)
keep = []

class iovec(ctypes.Structure):
    _fields_ = [("base", ctypes.c_void_p), ("len", ctypes.c_size_t)]

def clone_newuser():
    r = libc.syscall(NR["clone"], ctypes.c_ulong(0x10000000 | signal.SIGCHLD), 0, 0, 0, 0, 0)
    if r == 0:
        os._exit(0)
    if r < 0:
        return err()
    os.waitpid(r, 0)
    return "ok"

def process_vm_readv():
    src = ctypes.create_string_buffer(b"hello"); dst = ctypes.create_string_buffer(8)
    l = iovec(ctypes.addressof(dst), 5); r = iovec(ctypes.addressof(src), 5)
    return sc("process_vm_readv", os.getpid(), ctypes.addressof(l), 1, ctypes.addressof(r), 1, 0)

def name_to_handle_at():
    h = ctypes.create_string_buffer(struct.pack("Ii", 128, 0) + b"\0" * 128); mid = ctypes.c_int(0)
    return sc("name_to_handle_at", -100, cstr(b"."), ctypes.addressof(h), ctypes.addressof(mid), 0)

def ia32_getpid():
    # mov eax, 20 (ia32 getpid); int 0x80; movsxd rax, eax; ret
    code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0x48, 0x63, 0xc0, 0xc3])
    m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    m.write(code)
    r = ctypes.CFUNCTYPE(ctypes.c_long)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()
    if r == os.getpid():
        return "ok"
    if r < 0:
        return errno.errorcode.get(-r, str(-r))
    return "unexpected:%d" % r

def with_ctty(op):
    """Run op(0) in a child of a new session whose controlling terminal is
    a fresh pty (pty.fork): TIOCSTI on a tty that is not the controlling
    one fails with EPERM even without a filter, so this is the only
    meaningful target."""
    pid, master = pty.fork()
    if pid == 0:
        try:
            res = op(0)
        except Exception as e:
            res = "exc:" + repr(e)
        os.write(1, ("RESULT=" + res + "\n").encode())
        os._exit(0)
    out = b""
    while True:
        try:
            d = os.read(master, 1024)
        except OSError:
            break
        if not d:
            break
        out += d
    os.waitpid(pid, 0)
    for l in out.decode(errors="replace").splitlines():
        if "RESULT=" in l:
            return l.split("RESULT=", 1)[1].strip()
    return "noresult:" + repr(out)

def ioctl(req, arg):
    return lambda fd: sc("ioctl", fd, req, arg)

tests = dict(
    ptrace_traceme=lambda: sc("ptrace", 0),                                                # PTRACE_TRACEME
    mount=lambda: sc("mount", cstr(b"none"), cstr(b"/nonexistent-jail-test"), cstr(b"tmpfs"), 0, 0),
    unshare_user=lambda: sc("unshare", 0x10000000),                                        # CLONE_NEWUSER
    clone_newuser=clone_newuser,
    clone3=lambda: sc("clone3", 0, 0),
    bpf=lambda: sc("bpf", 9999, 0, 0),
    perf_event_open=lambda: sc("perf_event_open", 0, 0, -1, -1, 0),
    io_uring_setup=lambda: sc("io_uring_setup", 0, 0),
    keyctl=lambda: sc("keyctl", 0, -3, 0),                                                 # KEYCTL_GET_KEYRING_ID, session
    userfaultfd=lambda: sc("userfaultfd", 1 | os.O_CLOEXEC),                               # UFFD_USER_MODE_ONLY
    process_vm_readv=process_vm_readv,
    chroot=lambda: sc("chroot", cstr(b"/nonexistent-jail-test")),
    name_to_handle_at=name_to_handle_at,
    x32_getpid=lambda: raw(39 | 0x40000000),
    ia32_getpid=ia32_getpid,
    tcgets=lambda: with_ctty(ioctl(0x5401, cstr(b"\0" * 64))),
    tiocsti=lambda: with_ctty(ioctl(0x5412, cstr(b"x"))),
    tiocsti_high_bits=lambda: with_ctty(ioctl(0xdead00005412, cstr(b"x"))),
    tioclinux=lambda: with_ctty(ioctl(0x541c, cstr(b"\x02" + b"\0" * 32))),
    # Socket families beyond unix, IP and rtnetlink; the family compared on
    # the whole register; netlink protocols other than route.
    socket_packet=lambda: sc("socket", 17, 3, 0),                                          # AF_PACKET, SOCK_RAW
    socket_family_high_bits=lambda: sc("socket", 2 | (1 << 32), 1, 0),                     # AF_INET + junk
    netlink_audit=lambda: sc("socket", 16, 3, 9),                                          # AF_NETLINK, NETLINK_AUDIT
    socketpair_inet=lambda: sc("socketpair", 2, 1, 0, cstr(b"\0" * 8)),
    # The rest of the mount family, modules, kexec, namespaces, keys,
    # file handles: arguments the kernel itself rejects differently.
    umount2=lambda: sc("umount2", cstr(b"/nonexistent-jail-test"), 0),
    pivot_root=lambda: sc("pivot_root", cstr(b"/nonexistent-jail-a"), cstr(b"/nonexistent-jail-b")),
    open_tree=lambda: sc("open_tree", -100, cstr(b"/nonexistent-jail-test"), 0),
    move_mount=lambda: sc("move_mount", -1, cstr(b""), -1, cstr(b""), 0),
    fsopen=lambda: sc("fsopen", cstr(b"nonexistentfs"), 0),
    init_module=lambda: sc("init_module", 0, 0, cstr(b"")),
    kexec_load=lambda: sc("kexec_load", 0, 0, 0, 0xdead0000),                              # invalid flags
    setns=lambda: sc("setns", -1, 0),
    add_key=lambda: sc("add_key", cstr(b"user"), 0, 0, 0, -3),
    open_by_handle_at=lambda: sc("open_by_handle_at", -1, 0, 0),
)

res = {}
for name in tests:
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            out = tests[name]()
        except Exception as e:
            out = "exc:" + repr(e)
        os.write(w, out.encode())
        os._exit(0)
    os.close(w)
    data = b""
    while True:
        d = os.read(r, 4096)
        if not d:
            break
        data += d
    os.close(r)
    _, st = os.waitpid(pid, 0)
    res[name] = "killed:" + signal.Signals(os.WTERMSIG(st)).name if os.WIFSIGNALED(st) else data.decode()
print(json.dumps(res))
`

func runAttacks(t *testing.T, r Result) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.Stdout)), &m); err != nil || r.Code != 0 {
		t.Fatalf("attack script: %v\n%s", err, r)
	}
	return m
}

func TestSeccompAttacks(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("the attack script uses x86_64 syscall numbers and machine code; this is %s", runtime.GOARCH)
	}
	t.Parallel()
	// want: the errno the filter must answer. Every attack's answer on the
	// host (the same script, same user, no jail) must differ, proving the
	// filter, not the kernel's other checks, made it fail.
	want := map[string]string{
		"ptrace_traceme":          "EPERM",
		"mount":                   "EPERM",
		"unshare_user":            "EPERM",
		"clone_newuser":           "EPERM",
		"clone3":                  "ENOSYS",
		"bpf":                     "EPERM",
		"perf_event_open":         "EPERM",
		"io_uring_setup":          "EPERM",
		"keyctl":                  "EPERM",
		"userfaultfd":             "EPERM",
		"process_vm_readv":        "EPERM",
		"chroot":                  "EPERM",
		"name_to_handle_at":       "EPERM",
		"x32_getpid":              "ENOSYS",
		"ia32_getpid":             "ENOSYS",
		"tiocsti":                 "EPERM",
		"tiocsti_high_bits":       "EPERM",
		"tioclinux":               "EPERM",
		"tcgets":                  "ok", // control: the pty works, only injection is refused
		"socket_packet":           "EAFNOSUPPORT",
		"socket_family_high_bits": "EAFNOSUPPORT",
		"netlink_audit":           "EPERM",
		"socketpair_inet":         "EAFNOSUPPORT",
		"umount2":                 "EPERM",
		"pivot_root":              "EPERM",
		"open_tree":               "EPERM",
		"move_mount":              "EPERM",
		"fsopen":                  "EPERM",
		"init_module":             "EPERM",
		"kexec_load":              "EPERM",
		"setns":                   "EPERM",
		"add_key":                 "EPERM",
		"open_by_handle_at":       "EPERM",
	}
	// Calls the kernel itself refuses an unprivileged user first: their
	// host control proves the filter only as root (CI runs as root).
	privileged := map[string]bool{"socket_packet": true, "umount2": true, "pivot_root": true, "move_mount": true,
		"fsopen": true, "init_module": true, "kexec_load": true, "open_by_handle_at": true}
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/attacks.py", attacksPy, 0o644)
		out, code := s.HostOut(s.Project, "python3", "attacks.py")
		host := runAttacks(t, Result{Stdout: out, Code: code})
		jailed := runAttacks(t, s.Jail("--", "python3", "attacks.py"))
		// `unshare -U` from util-linux, the way a script would do it.
		u := s.Sh("unshare -U true")
		if u.Code == 0 || !strings.Contains(u.Stderr, "Operation not permitted") {
			t.Errorf("unshare -U true inside: want failure with EPERM:\n%s", u)
		}
		if hu, code := s.HostOut(s.Project, "unshare", "-U", "true"); code != 0 {
			t.Errorf("control: unshare -U true fails on the host too (%s), the jailed check proves nothing", hu)
		}
		for name, w := range want {
			if got := jailed[name]; got != w {
				t.Errorf("%s inside the jail: got %s, want %s", name, got, w)
			}
			if name == "tcgets" {
				if host[name] != "ok" {
					t.Errorf("control: TCGETS on a pty fails on the host: %s", host[name])
				}
				continue
			}
			if host[name] == w {
				if name == "x32_getpid" {
					t.Logf("x32_getpid: the kernel has no x32 ABI (host answers %s too); ia32_getpid checks the foreign-ABI guard", host[name])
					continue
				}
				if privileged[name] && s.R.UID != 0 {
					continue // the root runner's control covers it
				}
				t.Errorf("control: %s answers %s on the host too, so the jailed result does not prove the filter", name, host[name])
			}
		}
		t.Logf("host: %v", host)
	})
}

func TestProcessStatus(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		// The command itself, a grandchild, and jail's init (PID 1).
		r := s.MustSh("cat /proc/self/status; echo ==child; sh -c 'cat /proc/self/status'; echo ==init; grep -E '^(NoNewPrivs|Seccomp|Cap[A-Za-z]+):' /proc/1/status")
		for i, part := range strings.Split(r.Stdout, "==") {
			fields := map[string]string{}
			for _, l := range lines(part) {
				if k, v, ok := strings.Cut(l, ":"); ok {
					fields[k] = strings.TrimSpace(v)
				}
			}
			if fields["NoNewPrivs"] != "1" {
				t.Errorf("part %d: NoNewPrivs = %q, want 1", i, fields["NoNewPrivs"])
			}
			if fields["Seccomp"] != "2" {
				t.Errorf("part %d: Seccomp = %q, want 2 (filter mode)", i, fields["Seccomp"])
			}
			for _, c := range []string{"CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"} {
				if fields[c] != "0000000000000000" {
					t.Errorf("part %d: %s = %q, want all zero", i, c, fields[c])
				}
			}
		}
		if !strings.Contains(r.Stdout, "==init") {
			t.Fatalf("missing parts:\n%s", r)
		}
		// Control: the host process running jail is not filtered.
		status := hostFile(t, "/proc/self/status")
		if !strings.Contains(status, "Seccomp:\t0") {
			t.Errorf("control: the test process itself is under seccomp; the check is not meaningful")
		}
	})
}

func TestEnvSecretsArePlaceholders(t *testing.T) {
	t.Parallel()
	const ghToken = "ghp_REALTOKEN0123456789abcdefABCDEF0123"
	const password = "hunter2-REALPASSWORD-77"
	secrets := []string{EnvSecret, ghToken, password}
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.Env = []string{"ANTHROPIC_API_KEY=" + EnvSecret, "GITHUB_TOKEN=" + ghToken, "MY_SERVICE_PASSWORD=" + password, "FOO=bar"}
		r := s.MustSh(`
			echo ==env; env
			echo ==self; tr '\0' '\n' < /proc/self/environ
			echo ==init; cat /proc/1/environ 2>&1; cat /proc/1/cmdline; echo
			echo ==all; cat /proc/*/environ /proc/*/cmdline 2>/dev/null | tr '\0' '\n'
			echo ==py; python3 -c 'import os; print(os.environ.get("ANTHROPIC_API_KEY"))'
			true`)
		noSecret(t, r, "environment", secrets...)
		env := between(r.Stdout, "==env\n", "==self")
		for _, name := range []string{"ANTHROPIC_API_KEY", "GITHUB_TOKEN", "MY_SERVICE_PASSWORD"} {
			re := regexp.MustCompile(`(?m)^` + name + `=(jail-secret-` + name + `-[0-9A-Za-z]+|(sk-ant-|ghp_)jail[0-9A-Za-z]+)$`)
			if !re.MatchString(env) {
				t.Errorf("env inside has no placeholder for %s:\n%s", name, env)
			}
		}
		if !regexp.MustCompile(`(?m)^FOO=bar$`).MatchString(env) {
			t.Errorf("non-secret FOO=bar did not pass through:\n%s", env)
		}

		// Host side: while the jail runs, no process under jail's host
		// process (bubblewrap, init, the command) carries a real value.
		cmd := s.JailCmd("--", "sh", "-c", "echo ready; read x; exit 0")
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		defer cmd.Wait()
		defer stdin.Close()
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line != "ready\n" {
			t.Fatalf("jail did not start: %q", line)
		}
		kids := descendants(cmd.Process.Pid)
		if len(kids) < 2 {
			t.Fatalf("found only %d processes under jail (%v); expected bwrap, init and sh", len(kids), kids)
		}
		for _, pid := range kids {
			for _, f := range []string{"environ", "cmdline"} {
				b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
				if err != nil {
					continue // exited
				}
				for _, sec := range secrets {
					if strings.Contains(string(b), sec) {
						t.Errorf("host /proc/%d/%s (a process under jail) holds the real value of a secret", pid, f)
					}
				}
			}
		}
	})
}

// descendants lists the PIDs of every process below pid on the host.
func descendants(pid int) []int {
	children := map[int][]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...
		s := string(b)
		fs := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fs) < 2 {
			continue
		}
		pp, _ := strconv.Atoi(fs[1])
		children[pp] = append(children[pp], p)
	}
	var out []int
	queue := []int{pid}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			out = append(out, c)
			queue = append(queue, c)
		}
	}
	return out
}

func TestNothingSurvivesTheJail(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		base := 600000 + mrand.IntN(300000)
		n1, n2, n3 := strconv.Itoa(base), strconv.Itoa(base+1), strconv.Itoa(base+2)
		cmd := s.JailCmd("--", "sh", "-c", fmt.Sprintf(
			"setsid sleep %s </dev/null >/dev/null 2>&1 & nohup sleep %s >/dev/null 2>&1 & (trap '' HUP TERM; sleep %s </dev/null >/dev/null 2>&1 &) ; echo ready; read x; exit 0",
			n1, n2, n3))
		stdin, _ := cmd.StdinPipe()
		stdout, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		if line != "ready\n" {
			t.Fatalf("jail did not start: %q", line)
		}
		// Control: while the jail runs, the background processes exist.
		all := func(want bool) func() bool {
			return func() bool {
				for _, n := range []string{n1, n2, n3} {
					if (len(procsWithArgv("sleep", n)) > 0) != want {
						return false
					}
				}
				return true
			}
		}
		if !waitFor(2*time.Second, all(true)) {
			t.Fatalf("control: the background sleeps never appeared on the host")
		}
		stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("jail: %v", err)
		}
		if !waitFor(2*time.Second, all(false)) {
			for _, n := range []string{n1, n2, n3} {
				if pids := procsWithArgv("sleep", n); len(pids) > 0 {
					t.Errorf("`sleep %s` started in the jail survives it as host PID %v", n, pids)
					for _, p := range pids {
						if pid, err := strconv.Atoi(p); err == nil {
							syscall.Kill(pid, syscall.SIGKILL)
						}
					}
				}
			}
		}
	})
}

func TestExitCodes(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		if r := s.Jail("--", "sh", "-c", "exit 7"); r.Code != 7 {
			t.Errorf("exit 7: got %d\n%s", r.Code, r)
		}
		if r := s.Jail("--", "true"); r.Code != 0 || r.Stderr != "" {
			t.Errorf("true: got %d, stderr %q", r.Code, r.Stderr)
		}
		r := s.Jail("--", "no-such-cmd")
		if r.Code != 127 {
			t.Errorf("no-such-cmd: got exit %d, want 127\n%s", r.Code, r)
		}
		if l := lines(r.Stderr); len(l) != 1 || !strings.HasPrefix(l[0], "jail: ") || !strings.Contains(l[0], "no-such-cmd") {
			t.Errorf("no-such-cmd: want one line `jail: ... no-such-cmd ...` on stderr, got %q", r.Stderr)
		}
		s.WriteFile(s.Project+"/script.sh", "#!/bin/sh\necho script-ran\n", 0o644)
		r = s.Jail("--", "./script.sh")
		if r.Code != 126 || strings.Contains(r.Stdout, "script-ran") {
			t.Errorf("non-executable ./script.sh: got exit %d, want 126\n%s", r.Code, r)
		}
		if l := lines(r.Stderr); len(l) != 1 || !strings.HasPrefix(l[0], "jail: ") {
			t.Errorf("non-executable ./script.sh: want one `jail:` line on stderr, got %q", r.Stderr)
		}
		// Control: the same script runs once it is executable.
		os.Chmod(s.Project+"/script.sh", 0o755)
		if r = s.Jail("--", "./script.sh"); r.Code != 0 || r.Stdout != "script-ran\n" {
			t.Errorf("executable ./script.sh: got\n%s", r)
		}
		if r = s.Jail("--", "sh", "-c", "kill -TERM $$"); r.Code != 143 {
			t.Errorf("kill -TERM $$: got exit %d, want 143 (128+SIGTERM)\n%s", r.Code, r)
		}
		if r = s.Jail("--", "sh", "-c", "kill -KILL $$"); r.Code != 137 {
			t.Errorf("kill -KILL $$: got exit %d, want 137 (128+SIGKILL)\n%s", r.Code, r)
		}
	})
}

func TestMalformedConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, config, pos, msg string
	}{
		{"string-not-list", `{"filesystem": {"allowWrite": "."}}`, "1:31", "allowWrite"},
		{"string-not-list-multiline", "{\n  \"filesystem\": {\n    \"allowWrite\": \".\"\n  }\n}\n", "3:19", "allowWrite"},
		{"missing-comma-line-3", "{\n  \"filesystem\": {\n    \"allowWrite\": [\".\"] \"denyRead\": []\n  }\n}\n", "3:25", ""},
		{"trailing-garbage-line-3", "{\n  \"command\": {\"deny\": []}\n} garbage\n", "3:3", ""},
		{"unknown-key", "{\n  \"filesytem\": {}\n}\n", "2:3", "filesytem"},
		{"unknown-nested-key", "{\n  \"filesystem\": {\"allowWrites\": [\".\"]}\n}\n", "2:18", "allowWrites"},
	}
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		// Control: a valid config runs the command.
		s.WriteFile(s.Project+"/jail.json", `{"filesystem": {"allowWrite": ["."]}}`, 0o644)
		if r := s.Jail("--", "touch", "marker"); r.Code != 0 {
			t.Fatalf("control: valid jail.json failed:\n%s", r)
		}
		hostFile(t, s.Project+"/marker")
		os.Remove(s.Project + "/marker")
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				s.WriteFile(s.Project+"/jail.json", c.config, 0o644)
				r := s.Jail("--", "touch", "marker")
				if r.Code != 125 {
					t.Errorf("exit %d, want 125\n%s", r.Code, r)
				}
				l := lines(r.Stderr)
				if len(l) != 1 || strings.Count(r.Stderr, "\n") != 1 {
					t.Errorf("stderr must be exactly one line, got %q", r.Stderr)
				}
				if !strings.HasPrefix(r.Stderr, "jail: jail.json:"+c.pos+": ") {
					t.Errorf("stderr %q, want prefix %q", r.Stderr, "jail: jail.json:"+c.pos+": ")
				}
				if !strings.Contains(r.Stderr, c.msg) {
					t.Errorf("stderr %q does not name %q", r.Stderr, c.msg)
				}
				hostAbsent(t, s.Project+"/marker")
				os.Remove(s.Project + "/marker")
			})
		}
	})
}

func TestShellString(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.Jail("-c", "echo $((1+2))")
		if r.Code != 0 || r.Stdout != "3\n" {
			t.Errorf("jail -c 'echo $((1+2))': want 3\n%s", r)
		}
		r = s.Jail("-c", "exit 4")
		if r.Code != 4 {
			t.Errorf("jail -c 'exit 4': got %d", r.Code)
		}
	})
}

func TestSignalForwarding(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
			name := map[syscall.Signal]string{syscall.SIGTERM: "TERM", syscall.SIGINT: "INT", syscall.SIGHUP: "HUP"}[sig]
			t.Run(name, func(t *testing.T) {
				cmd := s.JailCmd("--", "sh", "-c", fmt.Sprintf(`trap "echo got-%s; exit 3" %s; echo ready; while :; do sleep 0.1; done`, strings.ToLower(name), name))
				pr, pw := io.Pipe()
				cmd.Stdout = pw
				var stderr strings.Builder
				cmd.Stderr = &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				out := make(chan string, 1)
				ready := make(chan bool, 1)
				go func() {
					br := bufio.NewReader(pr)
					var all strings.Builder
					for {
						l, err := br.ReadString('\n')
						all.WriteString(l)
						if l == "ready\n" {
							ready <- true
						}
						if err != nil {
							break
						}
					}
					out <- all.String()
				}()
				select {
				case <-ready:
				case <-time.After(10 * time.Second):
					cmd.Process.Kill()
					t.Fatalf("jail did not start")
				}
				time.Sleep(500 * time.Millisecond)
				cmd.Process.Signal(sig)
				done := make(chan error, 1)
				go func() { done <- cmd.Wait(); pw.Close() }()
				var err error
				select {
				case err = <-done:
				case <-time.After(5 * time.Second):
					cmd.Process.Kill()
					<-done
					t.Fatalf("jail did not exit within 5 s of SIG%s", name)
				}
				stdout := <-out
				code := 0
				if ee, ok := err.(*exec.ExitError); ok {
					code = ee.ExitCode()
				}
				if !strings.Contains(stdout, "got-"+strings.ToLower(name)) || code != 3 {
					t.Errorf("SIG%s to jail: want the trap to run and exit 3, got exit %d (%v)\nstdout %q\nstderr %q", name, code, err, stdout, stderr.String())
				}
			})
		}
	})
}
