package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// socksHostilePy asks the SOCKS5 bridge for names carrying a raw ESC
// sequence, a C1 CSI (U+009B) and a byte that is not UTF-8, and prints
// "##socks-N=rep=CODE" for each.
const socksHostilePy = `
import socket, struct
hosts = [b"evil\x1b[2J.test", b"c1\xc2\x9b31m.test", b"bad\xff\x7f.test"]
for i, h in enumerate(hosts):
    try:
        s = socket.create_connection(("127.0.0.1", 1080), timeout=10)
        s.sendall(b"\x05\x01\x00")
        s.recv(2)
        s.sendall(b"\x05\x01\x00\x03" + bytes([len(h)]) + h + struct.pack(">H", 80))
        rep = s.recv(10)
        print("##socks-%d=rep=%d" % (i, rep[1] if len(rep) > 1 else -1))
    except Exception as e:
        print("##socks-%d=error:%r" % (i, e))
`

// rawControl returns a description of the first character in out that a
// terminal would act on (a C0 control other than newline and tab, DEL, a
// C1 control) or of a byte that is not UTF-8; "" when there is none.
func rawControl(out string) string {
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRuneInString(out[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			return "a byte that is not UTF-8 at " + context(out, i)
		case r < 0x20 && r != '\n' && r != '\t', r == 0x7f, r >= 0x80 && r <= 0x9f:
			return "a raw control character at " + context(out, i)
		}
		i += n
	}
	return ""
}

// context is the text around byte i, quoted.
func context(s string, i int) string {
	from, to := max(0, i-40), min(len(s), i+40)
	return strconvQuote(s[from:to])
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

// TestTerminalEscape: a jailed run puts ESC sequences, C1 controls, DEL
// and bytes that are not UTF-8 into everything jail prints on the user's
// terminal about it: request paths (denied and allowed, plain and
// intercepted), SOCKS5 host names and a denied command's argv. The jail's
// own exit summary, `jail log`, `jail log -f` (following while the run
// happens) and `jail log --json` must carry none of them raw, and still
// show them escaped, so the user sees what was attempted.
func TestTerminalEscape(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		setupNet(t, s, "")
		cfg := map[string]any{}
		b, err := os.ReadFile(s.Project + "/jail.json")
		if err != nil || json.Unmarshal(b, &cfg) != nil {
			t.Fatalf("reading the network config: %v", err)
		}
		cfg["command"] = map[string]any{"deny": []string{"git push"}}
		writeJailJSON(t, s, cfg)
		s.WriteFile(s.Project+"/sockshostile.py", socksHostilePy, 0o644)

		follow := exec.Command(jailBin, "log", "-f")
		follow.Dir = s.Project
		s.as(follow)
		var followOut bytes.Buffer
		follow.Stdout, follow.Stderr = &followOut, &followOut
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		defer follow.Process.Kill()

		r := s.Sh(probeSh + `
			echo session=$JAIL_SESSION
			P='-g -x http://127.0.0.1:3128'
			probe denied $P 'http://evil.test/deny%1b[2J%9b%c2%9b%7f'
			probe allowed $P 'http://plain.allowed.test/allow%1b[2J%c2%9b%ff%fe'
			probe allowed-tls $P 'https://api.allowed.test/tls%1b]0;pwned%07'
			python3 sockshostile.py
			git push "$(printf 'origin\033[2J\302\233\177\377')" >/dev/null 2>&1
			echo "##push=$?"
			mkdir -p "$(printf 'nest\033[2J\302\233')/.git"`)
		time.Sleep(800 * time.Millisecond) // -f polls every 200 ms
		follow.Process.Kill()
		follow.Wait()

		ps := probes(t, r)
		if p := getProbe(t, ps, r, "denied"); p.HTTP != "403" {
			t.Errorf("the request to evil.test was not refused: %s", p)
		}
		for _, name := range []string{"allowed", "allowed-tls"} {
			if p := getProbe(t, ps, r, name); p.HTTP != "200" {
				t.Errorf("control: the allowed request %s failed: %s", name, p)
			}
		}
		for _, name := range []string{"socks-0", "socks-1", "socks-2"} {
			wantKV(t, r, name, is("rep=2"), "rep=2 (a name no rule allows)")
		}
		wantKV(t, r, "push", func(v string) bool { return v != "0" }, "git push refused")

		// The jail's own lines: its stderr, the command's output silenced.
		if bad := rawControl(r.Stderr); bad != "" {
			t.Errorf("the jail's exit summary holds %s:\n%s", bad, r.Stderr)
		}
		for _, want := range []string{`evil\x1b[2J.test`, `c1\u009b31m.test`, `bad\xff\x7f.test`, "command denied", `nest\x1b[2J\u009b/.git`} {
			if !strings.Contains(r.Stderr, want) {
				t.Errorf("the exit summary does not show %s escaped:\n%s", want, r.Stderr)
			}
		}

		table := s.Jail("log")
		if table.Code != 0 {
			t.Fatalf("jail log failed:\n%s", table)
		}
		wantShown := []string{`/deny\x1b[2J`, `/allow\x1b[2J\u009b`, `/tls\x1b]0;pwned\x07`, `evil\x1b[2J.test`, `c1\u009b31m.test`, `origin\x1b[2J\u009b\x7f`}
		for what, out := range map[string]string{"jail log": table.Stdout + table.Stderr, "jail log -f": followOut.String()} {
			if bad := rawControl(out); bad != "" {
				t.Errorf("%s prints %s:\n%s", what, bad, out)
			}
			for _, want := range wantShown {
				if !strings.Contains(out, want) {
					t.Errorf("%s does not show %s escaped:\n%s", what, want, out)
				}
			}
		}

		js := s.Jail("log", "--json")
		if bad := rawControl(js.Stdout); bad != "" {
			t.Errorf("jail log --json prints %s:\n%s", bad, js.Stdout)
		}
		ds := decisions(t, s, sessionOf(t, r))
		d, ok := findDecision(ds, "plain.allowed.test", "/allow\x1b[2J\u009b\ufffd\ufffd")
		if !ok || d.Verdict != "allow" {
			t.Errorf("--json lost the allowed path (ESC and U+009B kept, the invalid bytes replaced by U+FFFD):\n%s", dumpDecisions(ds))
		}
		if d, ok := findDecision(ds, "evil\x1b[2J.test", ""); !ok || d.Verdict != "deny" {
			t.Errorf("--json has no denial of the SOCKS name with ESC:\n%s", dumpDecisions(ds))
		}
		found := false
		for _, d := range execDenials(ds) {
			found = found || strings.Contains(d.Path, "origin\x1b[2J\u009b\x7f\ufffd")
		}
		if !found {
			t.Errorf("--json has no exec denial with the argv (ESC kept):\n%s", dumpDecisions(ds))
		}
		raw, err := os.ReadFile(decisionLog(s))
		if err != nil {
			t.Fatal(err)
		}
		if bad := rawControl(string(raw)); bad != "" {
			t.Errorf("the decision log file holds %s", bad)
		}
	})
}

// TestTerminalEscapeWatch: in watch mode the report printed after the run
// lists what the traced command touched and the requests it made; names
// carrying ESC sequences and C1 controls (a SOCKS5 host name, a file read)
// are printed escaped.
func TestTerminalEscapeWatch(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/sockshostile.py", socksHostilePy, 0o644)
		s.WriteFile(s.Project+"/w\x1b[2J\u009b.txt", "read me\n", 0o644)
		r := s.Jail("--watch", "--", "sh", "-c", `python3 sockshostile.py; cat "$(printf 'w\033[2J\302\233.txt')" >/dev/null; echo done`)
		if r.Code != 0 || !strings.Contains(r.Stdout, "done") {
			t.Fatalf("the watched run failed:\n%s", r)
		}
		if bad := rawControl(r.Stderr); bad != "" {
			t.Errorf("the watch report holds %s:\n%s", bad, r.Stderr)
		}
		if !strings.Contains(r.Stderr, `evil\x1b[2J.test`) {
			t.Errorf("the exit summary does not show the denied SOCKS name escaped:\n%s", r.Stderr)
		}
		if !strings.Contains(r.Stderr, `jail:     tried to reach evil\x1b[2j.test: kept denied`) {
			t.Errorf("the watch report does not list the denied SOCKS name escaped:\n%s", r.Stderr)
		}
		table := s.Jail("log")
		if bad := rawControl(table.Stdout); bad != "" {
			t.Errorf("jail log prints %s:\n%s", bad, table.Stdout)
		}
		if !strings.Contains(table.Stdout, `w\x1b[2J\u009b.txt`) {
			t.Errorf("jail log does not show the traced read of the file escaped:\n%s", table.Stdout)
		}
	})
}

// TestTerminalEscapeTrust: a cloned project's jail.json names domains and
// values carrying C1 controls (U+009B is a one-byte CSI, which the
// config's domain check lets through), U+202E (which reorders what
// follows it) and ESC. The refusal line of an untrusted run, `jail trust`
// listing what it trusted and `jail plan` show them escaped, never raw.
func TestTerminalEscapeTrust(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.NoAutoTrust = true
		writeJailJSON(t, s, map[string]any{
			"network": map[string]any{
				"allow": []string{"evil\u009b2J.test", "rtl\u202etxt.test"},
				"hosts": map[string]string{"c1\u009bhost.test": "127.0.0.1:9"},
			},
			"env": map[string]any{"set": map[string]string{"TOOL_MODE": "v\x1b[2J\u009b"}},
		})
		refused := s.Jail("--", "true")
		if refused.Code != 125 {
			t.Fatalf("an untrusted widening jail.json ran (want exit 125):\n%s", refused)
		}
		trusted := s.Jail("trust")
		if trusted.Code != 0 {
			t.Fatalf("jail trust failed:\n%s", trusted)
		}
		plan := s.Jail("plan", "--", "true")
		if plan.Code != 0 {
			t.Fatalf("jail plan failed:\n%s", plan)
		}
		for what, out := range map[string]string{"the refusal": refused.Stderr, "jail trust": trusted.Stdout + trusted.Stderr, "jail plan": plan.Stdout + plan.Stderr} {
			if bad := rawControl(out); bad != "" {
				t.Errorf("%s prints %s:\n%s", what, bad, out)
			}
			if strings.ContainsRune(out, '\u202e') {
				t.Errorf("%s prints U+202E raw:\n%s", what, out)
			}
			if !strings.Contains(out, `evil\u009b2J.test`) {
				t.Errorf("%s does not show the domain with U+009B escaped:\n%s", what, out)
			}
		}
		for what, out := range map[string]string{"the refusal": refused.Stderr, "jail trust": trusted.Stdout} {
			for _, want := range []string{`rtl\u202etxt.test`, `c1\u009bhost.test`} {
				if !strings.Contains(out, want) {
					t.Errorf("%s does not show %s:\n%s", what, want, out)
				}
			}
		}
	})
}
