package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
)

// Helpers for the learning and watch tests (learn_test.go): the scripted
// command they observe, the learned profile it produces, the host home
// before and after, and jail.json with comments.

// toolScript is the command the learning and watch tests observe, placed
// in the project as ./tool so that its learned name is "tool". In every
// mode it reads its settings (~/.config/tool/settings and a nested file),
// writes its cache (~/.cache/tool/x, creating the directory), runs python3,
// tries the SSH key (masked: the attempt is what is recorded) and fetches
// /tool-fetch from the upstream on the host's 127.0.0.1:%[1]d through the
// proxy. Extra modes:
//
//	extra           also reads ~/.config/othertool/secret (never learned)
//	write-settings  also appends to ~/.config/tool/settings (learned read-only)
//	watch           also fetches an unknown name, then waits for the test to
//	                create .tool-go-on in the project (up to 15 s), so that
//	                `jail log -f` can be seen streaming while the run is live,
//	                then tries mkdir ~/.config/tool (EEXIST) and reading
//	                ~/.config/tool/absent (ENOENT)
//
// Every failure prints "tool: ..." and exits with its own code.
const toolScript = `#!/bin/sh
set -u
mode=${1:-}
unset NO_PROXY no_proxy
cat "$HOME/.config/tool/settings" >/dev/null || { echo "tool: cannot read settings"; exit 3; }
cat "$HOME/.config/tool/sub/more" >/dev/null || { echo "tool: cannot read sub/more"; exit 3; }
{ mkdir -p "$HOME/.cache/tool" && echo cached >"$HOME/.cache/tool/x"; } || { echo "tool: cannot write cache"; exit 4; }
python3 -c 'print("tool: python ok")' || { echo "tool: python failed"; exit 5; }
if cat "$HOME/.ssh/id_ed25519" >/dev/null 2>&1; then echo "tool: ssh key opened"; else echo "tool: ssh key refused"; fi
code=$(curl -sS --max-time 10 -o /dev/null -w '%%{http_code}' -x http://127.0.0.1:3128 http://127.0.0.1:%[1]d/tool-fetch)
[ "$code" = 200 ] || { echo "tool: fetch failed: http $code"; exit 6; }
echo "tool: fetched"
case $mode in
extra)
	cat "$HOME/.config/othertool/secret" >/dev/null || { echo "tool: cannot read othertool"; exit 7; }
	echo "tool: read othertool" ;;
write-settings)
	echo changed >>"$HOME/.config/tool/settings" || { echo "tool: cannot write settings"; exit 8; }
	echo "tool: wrote settings" ;;
watch)
	u=$(curl -sS --max-time 5 -o /dev/null -w '%%{http_code}' -x http://127.0.0.1:3128 http://%[2]s/tool-unknown 2>&1)
	echo "tool: unknown name: $u"
	i=0
	while [ ! -e .tool-go-on ] && [ $i -lt 150 ]; do sleep 0.1; i=$((i+1)); done
	[ -e .tool-go-on ] || echo "tool: gave up waiting for .tool-go-on"
	mkdir "$HOME/.config/tool" 2>/dev/null && echo "tool: ~/.config/tool did not exist?"
	cat "$HOME/.config/tool/absent" >/dev/null 2>&1 && echo "tool: absent file exists?" ;;
esac
echo "tool: done"
`

// toolUnknownName is a name no rule mentions, fetched in watch mode.
const toolUnknownName = "watch-unknown.invalid"

// Contents of the tool's files in the host home.
const (
	toolSettings  = "colour = blue\n"
	toolMore      = "nested = yes\n"
	otherToolData = "OTHERTOOL-PRIVATE-7c1d\n"
)

// toolRig is the tool installed in one sandbox, with its upstream.
type toolRig struct {
	s  *Sandbox
	Up *upstream
}

// setupTool writes ./tool into the project (committed, so the project is
// clean), its settings and an unrelated tool's file into the host home,
// and starts the plain-HTTP upstream the tool fetches from.
func setupTool(t *testing.T, s *Sandbox) *toolRig {
	t.Helper()
	g := &toolRig{s: s, Up: newUpstream(t, false, "")}
	s.WriteFile(s.Project+"/tool", fmt.Sprintf(toolScript, g.Up.Port(), toolUnknownName), 0o755)
	s.WriteFile(s.Home+"/.config/tool/settings", toolSettings, 0o644)
	s.WriteFile(s.Home+"/.config/tool/sub/more", toolMore, 0o644)
	s.WriteFile(s.Home+"/.config/othertool/secret", otherToolData, 0o600)
	s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "add", "tool")
	s.Host("git", "-C", s.Project, "-c", "user.email=t@example.test", "-c", "user.name=t", "commit", "-qm", "tool")
	return g
}

// Domain is the upstream as a learned network.allow entry.
func (g *toolRig) Domain() string { return fmt.Sprintf("127.0.0.1:%d", g.Up.Port()) }

// AllowFlag is the --allow-domain flag a learning or watch run needs for
// the upstream: loopback addresses must be named, as in any run.
func (g *toolRig) AllowFlag() []string { return []string{"--allow-domain", g.Domain()} }

// Fetches is how many times the upstream served /tool-fetch.
func (g *toolRig) Fetches() int {
	n := 0
	for _, p := range g.Up.Paths() {
		if p == "/tool-fetch" {
			n++
		}
	}
	return n
}

// LearnedPath is where a learning run of ./tool writes its profile.
func (g *toolRig) LearnedPath() string { return learnedPath(g.s, "tool") }

// learnedPath is $XDG_CONFIG_HOME/jail/learned/NAME.json when the sandbox
// sets XDG_CONFIG_HOME, else ~/.config/jail/learned/NAME.json.
func learnedPath(s *Sandbox, name string) string {
	conf := filepath.Join(s.Home, ".config")
	for _, kv := range s.Env {
		if v, ok := strings.CutPrefix(kv, "XDG_CONFIG_HOME="); ok && filepath.IsAbs(v) {
			conf = v
		}
	}
	return filepath.Join(conf, "jail", "learned", name+".json")
}

// learned is a learned profile file.
type learned struct {
	Description string `json:"description"`
	Filesystem  struct {
		AllowRead  []string `json:"allowRead"`
		AllowWrite []string `json:"allowWrite"`
	} `json:"filesystem"`
	Network struct {
		Allow []string `json:"allow"`
	} `json:"network"`
	Learned struct {
		Command    string   `json:"command"`
		Tracer     string   `json:"tracer"`
		Programs   []string `json:"programs"`
		KeptDenied []string `json:"keptDenied"`
	} `json:"learned"`

	raw string
}

// readLearned parses the learned profile at path, failing the test if it
// is missing or not the documented JSON.
func readLearned(t *testing.T, path string, r Result) *learned {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("no learned profile at %s after the learning run: %v\n%s", path, err, r)
	}
	var l learned
	if err := json.Unmarshal(b, &l); err != nil {
		t.Fatalf("the learned profile %s is not the documented JSON: %v\n%s", path, err, b)
	}
	l.raw = string(b)
	return &l
}

// learnTool runs `jail --learning [extra...] --allow-domain UPSTREAM --
// ./tool` and returns the run and the learned profile; the run must exit 0
// and say where it wrote the profile.
func (g *toolRig) learn(t *testing.T, extra ...string) (Result, *learned) {
	t.Helper()
	args := append([]string{"--learning"}, extra...)
	args = append(args, g.AllowFlag()...)
	args = append(args, "--", "./tool")
	r := g.s.Jail(args...)
	if r.Code != 0 {
		t.Fatalf("jail %s: want exit 0:\n%s", strings.Join(args, " "), r)
	}
	if want := "jail: learned profile written to " + g.LearnedPath(); !hasLineStarting(r.Stderr, want) {
		t.Errorf("stderr has no line %q (optionally followed by more words):\n%s", want, r.Stderr)
	}
	return r, readLearned(t, g.LearnedPath(), r)
}

// checkToolProfile checks a learned profile of ./tool in its default mode
// against what the tool did: exactly its config directory readable,
// exactly its cache directory writable, exactly the upstream allowed,
// python3 and curl among the programs, the SSH key kept denied and no
// secret proposed.
func checkToolProfile(t *testing.T, g *toolRig, l *learned, tracer string) {
	t.Helper()
	wantList(t, "filesystem.allowRead", l.Filesystem.AllowRead, []string{"~/.config/tool"}, l)
	wantList(t, "filesystem.allowWrite", l.Filesystem.AllowWrite, []string{"~/.cache/tool"}, l)
	wantList(t, "network.allow", l.Network.Allow, []string{g.Domain()}, l)
	if l.Learned.Command != "tool" {
		t.Errorf("learned.command = %q, want \"tool\":\n%s", l.Learned.Command, l.raw)
	}
	if l.Learned.Tracer != tracer {
		t.Errorf("learned.tracer = %q, want %q:\n%s", l.Learned.Tracer, tracer, l.raw)
	}
	if strings.TrimSpace(l.Description) == "" {
		t.Errorf("the learned profile has no description:\n%s", l.raw)
	}
	for _, prog := range []string{"python3", "curl"} {
		if !hasProgram(l.Learned.Programs, prog) {
			t.Errorf("learned.programs has no %s (an absolute path whose name starts %q): %q", prog, prog, l.Learned.Programs)
		}
	}
	for _, p := range l.Learned.Programs {
		if !filepath.IsAbs(p) {
			t.Errorf("learned.programs entry %q is not an absolute path", p)
		}
	}
	wantKey := "tried to read ~/.ssh/id_ed25519: kept denied"
	if !contains(l.Learned.KeptDenied, wantKey) {
		t.Errorf("learned.keptDenied has no %q: %q", wantKey, l.Learned.KeptDenied)
	}
	for _, p := range append(append([]string{}, l.Filesystem.AllowRead...), l.Filesystem.AllowWrite...) {
		if secretPath(p) {
			t.Errorf("the learned profile proposes the secret path %q:\n%s", p, l.raw)
		}
	}
	for _, sec := range []string{SSHKeySecret, AWSSecret, otherToolData} {
		if strings.Contains(l.raw, strings.TrimSpace(sec)) {
			t.Errorf("the learned profile contains the secret %q:\n%s", sec, l.raw)
		}
	}
}

// wantList fails unless got is exactly want (order included: the profile
// is sorted and deterministic).
func wantList(t *testing.T, what string, got, want []string, l *learned) {
	t.Helper()
	if strings.Join(got, "\x00") != strings.Join(want, "\x00") {
		t.Errorf("%s = %q, want exactly %q; learned profile:\n%s", what, got, want, l.raw)
	}
}

// hasProgram reports whether progs holds a path whose base name is name or
// a versioned form of it (python3 → /usr/bin/python3 or /usr/bin/python3.11).
func hasProgram(progs []string, name string) bool {
	for _, p := range progs {
		if programName(p) == name {
			return true
		}
	}
	return false
}

// programName is a program's base name without a version suffix
// ("python3.11" → "python3").
func programName(p string) string {
	b := filepath.Base(strings.Fields(p + " ")[0])
	if i := strings.IndexByte(b, '.'); i > 0 && strings.Trim(b[i:], ".0123456789") == "" {
		b = b[:i]
	}
	return b
}

// programNames is the sorted set of programName over progs.
func programNames(progs []string) []string {
	set := map[string]bool{}
	for _, p := range progs {
		set[programName(p)] = true
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// secretPath reports whether a learned "~/..." path is (or is inside, or
// contains) one of the home's credential stores.
func secretPath(p string) bool {
	for _, s := range []string{"~/.ssh", "~/.aws", "~/.gnupg", "~/.kube", "~/.docker", "~/.netrc", "~/.git-credentials", "~/.npmrc", "~/.pypirc"} {
		if p == s || strings.HasPrefix(p, s+"/") || strings.HasPrefix(s, p+"/") || p == "~" {
			return true
		}
	}
	return false
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// hasLine reports whether text has a line equal to want (trailing spaces
// ignored).
func hasLine(text, want string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimRight(l, " \r") == want {
			return true
		}
	}
	return false
}

// hasLineStarting reports whether text has a line that is want, or want
// followed by a space and more words: "jail: learned profile written to
// PATH (later runs of tool use it)" names PATH exactly.
func hasLineStarting(text, want string) bool {
	for _, l := range strings.Split(text, "\n") {
		l = strings.TrimRight(l, " \r")
		if l == want || strings.HasPrefix(l, want+" ") {
			return true
		}
	}
	return false
}

// lineWithPrefix returns the first line of text starting with prefix.
func lineWithPrefix(text, prefix string) (string, bool) {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// summarySections are the headings of the readable summary a learning run
// prints on stderr at exit.
var summarySections = []string{"Read-only (allowRead)", "Writable (allowWrite)", "Domains (network.allow)", "Programs run", "Kept denied"}

// checkStartLine checks jail's first word on the tracer: "jail: MODE
// (tracer: ebpf)" with eBPF, "jail: MODE (tracer: seccomp; ...)" (the
// reason and how to grant the eBPF capabilities, checked by
// TestLearningUnprivilegedEBPFMessage) or "jail: MODE (tracer: seccomp)"
// when JAIL_TRACER forces it.
func checkStartLine(t *testing.T, r Result, mode, tracer string) {
	t.Helper()
	if tracer == "ebpf" {
		if want := "jail: " + mode + " (tracer: ebpf)"; !hasLine(r.Stderr, want) {
			t.Errorf("stderr has no start line %q:\n%s", want, r.Stderr)
		}
		return
	}
	prefix := "jail: " + mode + " (tracer: seccomp"
	if !hasLine(r.Stderr, prefix+")") {
		if _, ok := lineWithPrefix(r.Stderr, prefix+";"); !ok {
			t.Errorf("stderr has no start line %q or starting %q:\n%s", prefix+")", prefix+";", r.Stderr)
		}
	}
}

// runnerTracer is the tracer a runner gets by default: eBPF as root, the
// seccomp fallback as the unprivileged user.
func runnerTracer(s *Sandbox) string {
	if s.R.UID == 0 {
		return "ebpf"
	}
	return "seccomp"
}

// homeSnapshot lists every entry of the host home: type, mode, size and
// modification time (symlinks: their target). jail's own state
// (~/.config/jail: CA, trust record, learned profiles; ~/.local/state/jail:
// the decision log) is left out, and so are the directories that hold it
// (~/.config, ~/.local, ~/.local/state), which jail itself may create or
// touch; what is inside them is listed.
func homeSnapshot(t *testing.T, home string) map[string]string {
	t.Helper()
	own := []string{".config/jail", ".local/state/jail"}
	snap := map[string]string{}
	err := filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(home, p)
		for _, o := range own {
			if rel == o {
				return fs.SkipDir
			}
			if rel == "." || strings.HasPrefix(o, rel+"/") {
				return nil // a holder of jail's state: its children are listed
			}
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		desc := fmt.Sprintf("%s size=%d mtime=%s", fi.Mode(), fi.Size(), fi.ModTime().Format("2006-01-02T15:04:05.000000000"))
		if fi.Mode()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			desc += " -> " + target
		}
		snap[rel] = desc
		return nil
	})
	if err != nil {
		t.Fatalf("listing the host home %s: %v", home, err)
	}
	return snap
}

// homeDiff describes what changed between two snapshots ("" if nothing).
func homeDiff(before, after map[string]string) string {
	var out []string
	for p, a := range after {
		if b, ok := before[p]; !ok {
			out = append(out, fmt.Sprintf("  new     ~/%s (%s)", p, a))
		} else if a != b {
			out = append(out, fmt.Sprintf("  changed ~/%s (%s → %s)", p, b, a))
		}
	}
	for p, b := range before {
		if _, ok := after[p]; !ok {
			out = append(out, fmt.Sprintf("  removed ~/%s (%s)", p, b))
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

// parseJSONC parses a jail.json with comments and trailing commas into a
// generic map.
func parseJSONC(t *testing.T, path string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading %s: %v", path, err)
	}
	var m map[string]any
	if err := json.Unmarshal(stripJSONC(b), &m); err != nil {
		t.Fatalf("%s is not JSON with comments: %v\n%s", path, err, b)
	}
	return m
}

// stripJSONC removes // and /* */ comments outside strings, and commas
// before a closing bracket or brace.
func stripJSONC(b []byte) []byte {
	var out bytes.Buffer
	inStr, esc := false, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inStr:
			out.WriteByte(c)
			if esc {
				esc = false
			} else if c == '\\' {
				esc = true
			} else if c == '"' {
				inStr = false
			}
		case c == '"':
			inStr = true
			out.WriteByte(c)
		case c == '/' && i+1 < len(b) && b[i+1] == '/':
			for i < len(b) && b[i] != '\n' {
				i++
			}
			out.WriteByte('\n')
		case c == '/' && i+1 < len(b) && b[i+1] == '*':
			i += 2
			for i+1 < len(b) && !(b[i] == '*' && b[i+1] == '/') {
				i++
			}
			i++
		case c == ']' || c == '}':
			// Drop a trailing comma (and the blanks after it).
			s := bytes.TrimRight(out.Bytes(), " \t\r\n")
			if len(s) > 0 && s[len(s)-1] == ',' {
				out.Truncate(len(s) - 1)
			}
			out.WriteByte(c)
		default:
			out.WriteByte(c)
		}
	}
	return out.Bytes()
}

// strList returns m[k1][k2] as a list of strings.
func strList(m map[string]any, k1, k2 string) []string {
	sec, _ := m[k1].(map[string]any)
	list, _ := sec[k2].([]any)
	var out []string
	for _, v := range list {
		if s, ok := v.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test
// reading at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// followLog starts `jail log -f` as the runner and returns its output so
// far (read at any time) and a stop function that kills it and waits.
func followLog(t *testing.T, s *Sandbox) (*syncBuffer, func()) {
	t.Helper()
	cmd := exec.Command(jailBin, "log", "-f")
	cmd.Dir = s.Project
	s.as(cmd)
	out := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting jail log -f: %v", err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
	}
	t.Cleanup(stop)
	return out, stop
}

// fileEntries are the decision log's file entries with method and path.
func fileEntries(ds []decision, method, path string) []decision {
	var out []decision
	for _, d := range ds {
		if d.Scheme == "file" && d.Method == method && d.Path == path {
			out = append(out, d)
		}
	}
	return out
}

// dumpTraced prints log entries with the fields traced accesses use.
func dumpTraced(ds []decision) string {
	if len(ds) == 0 {
		return "  (none)\n"
	}
	var b strings.Builder
	for _, d := range ds {
		fmt.Fprintf(&b, "  %s %s %s host=%q port=%d path=%q rule=%q reason=%q\n", d.Verdict, d.Scheme, d.Method, d.Host, d.Port, d.Path, d.Rule, d.Reason)
	}
	return b.String()
}
