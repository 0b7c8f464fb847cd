package main

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/jailsh/jail/jail/control"
)

// ctlHub serves a Hub in a private runtime directory, where the CLI finds
// it.
func ctlHub(t *testing.T, info control.Info, rules control.Rules) *control.Hub {
	t.Helper()
	t.Setenv("XDG_RUNTIME_DIR", t.TempDir())
	t.Setenv("HOME", t.TempDir())
	h := control.NewHub(control.HubConfig{Info: info, Rules: rules, Timeout: 20 * time.Second})
	if err := h.Listen(control.Dir()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })
	return h
}

func runCLI(args ...string) (string, string, int) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return out.String(), errb.String(), code
}

// What a jailed command chose (its argv, an exec's arguments) reaches the
// terminal escaped: a title or screen-clearing sequence is shown, never
// sent.
func TestCLIEscapesSessionText(t *testing.T) {
	h := ctlHub(t, control.Info{ID: "0123456789abcdef", Command: []string{"sh", "-c", "\x1b]0;owned\x07"}, Project: "/p", Started: time.Now()}, control.Rules{})
	out, errOut, code := runCLI("ps")
	if code != 0 || !strings.Contains(out, "0123456789abcdef") {
		t.Fatalf("jail ps: %d %q %q", code, out, errOut)
	}
	if strings.ContainsAny(out, "\x1b\x07") || !strings.Contains(out, `\x1b]0;owned\x07`) {
		t.Fatalf("jail ps printed the command unescaped: %q", out)
	}
	go h.Ask(context.Background(), control.Request{Kind: control.KindCommand, Rule: "command.ask git push", Argv: []string{"git", "push", "\x1b[2J"}, Cwd: "/p\x1b[H"})
	waitCLI(t, func() bool { out, _, _ := runCLI("pending"); return strings.Contains(out, "012345-1") })
	out, _, _ = runCLI("pending")
	if strings.ContainsAny(out, "\x1b") || !strings.Contains(out, `\x1b[2J`) {
		t.Fatalf("jail pending printed the argv unescaped: %q", out)
	}
}

// jail pending --json prints one Request per line with its id; approve
// and reject answer it, once by default or for the session; a command
// cannot be answered for the project; an unknown id matches nothing.
func TestCLIPendingApproveReject(t *testing.T) {
	h := ctlHub(t, control.Info{ID: "0123456789abcdef", Started: time.Now()}, control.Rules{})
	push := control.Request{Kind: control.KindCommand, Rule: "command.ask git push", Argv: []string{"git", "push"}, Cwd: "/p"}
	got := make(chan control.Answer, 1)
	go func() { got <- h.Ask(context.Background(), push) }()
	var req control.Request
	waitCLI(t, func() bool {
		out, _, _ := runCLI("pending", "--json")
		return json.Unmarshal([]byte(out), &req) == nil && req.ID != ""
	})
	if req.ID != "012345-1" || strings.Join(req.Argv, " ") != "git push" || req.Cwd != "/p" {
		t.Fatalf("pending %+v", req)
	}
	if _, e, code := runCLI("approve", req.ID, "--project"); code != 1 || !strings.Contains(e, "once or for the session") {
		t.Fatalf("approve --project of a command: %d %q", code, e)
	}
	if _, e, code := runCLI("approve", "012345-9"); code != 1 {
		t.Fatalf("approve of an unknown id: %d %q", code, e)
	}
	if out, e, code := runCLI("reject", req.ID, "--session"); code != 0 || !strings.Contains(out, "rejected") {
		t.Fatalf("reject --session: %d %q %q", code, out, e)
	}
	if a := <-got; a.Allow || a.By != "jail reject" || a.Scope != control.ScopeSession {
		t.Fatalf("answer %+v", a)
	}
	// Rejected for the session: asked again, refused at once.
	if a := h.Ask(context.Background(), push); a.Allow || a.Scope != control.ScopeSession {
		t.Fatalf("the session's answer was not kept: %+v", a)
	}
	go func() {
		got <- h.Ask(context.Background(), control.Request{Kind: control.KindCommand, Argv: []string{"npm", "publish"}, Cwd: "/p"})
	}()
	waitCLI(t, func() bool { out, _, _ := runCLI("pending", "--json"); return strings.Contains(out, `"id":"012345-2"`) })
	if _, e, code := runCLI("approve", "012345-2"); code != 0 {
		t.Fatalf("approve: %d %q", code, e)
	}
	if a := <-got; !a.Allow || a.Scope != control.ScopeOnce || a.By != "jail approve" {
		t.Fatalf("answer %+v", a)
	}
}

// jail allow and deny reach every session's live rules; --project
// without a way to write it, or a host that is not an entry, is refused.
func TestCLIRule(t *testing.T) {
	var live []string
	ctlHub(t, control.Info{ID: "0123456789abcdef", Started: time.Now()}, control.Rules{Live: func(allow bool, host string) error {
		live = append(live, map[bool]string{true: "allow ", false: "deny "}[allow]+host)
		return nil
	}})
	if out, e, code := runCLI("deny", "evil.example.test"); code != 0 || !strings.Contains(out, "0123456789abcdef") {
		t.Fatalf("jail deny: %d %q %q", code, out, e)
	}
	if _, e, code := runCLI("allow", "ok.example.test", "--session", "0123"); code != 0 {
		t.Fatalf("jail allow --session: %d %q", code, e)
	}
	if _, _, code := runCLI("allow", "x.example.test", "--session", "ffff"); code != 1 {
		t.Fatalf("jail allow --session of no session: %d", code)
	}
	if strings.Join(live, ",") != "deny evil.example.test,allow ok.example.test" {
		t.Fatalf("live rules %q", live)
	}
	st, err := control.Sessions(control.Dir())
	if err != nil || len(st) != 1 {
		t.Fatal(st, err)
	}
	s, err := st[0].Status(context.Background())
	if err != nil || strings.Join(s.Added, ",") != "deny evil.example.test,allow ok.example.test" {
		t.Fatalf("status %+v %v", s, err)
	}
}

func waitCLI(t *testing.T, cond func() bool) {
	t.Helper()
	for i := 0; i < 300; i++ {
		if cond() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("timed out")
}
