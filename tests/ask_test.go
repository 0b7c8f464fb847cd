package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// startJail starts jail with args in the project and returns a func that
// waits for it to end.
func startJail(t *testing.T, s *Sandbox, args ...string) func() Result {
	t.Helper()
	s.autoTrust(s.Project)
	cmd := exec.Command(jailBin, args...)
	cmd.Dir = s.Project
	s.as(cmd)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan Result, 1)
	go func() {
		err := cmd.Wait()
		r := Result{Stdout: out.String(), Stderr: errb.String(), Took: time.Since(start)}
		if ee, ok := err.(*exec.ExitError); ok {
			r.Code = ee.ExitCode()
		}
		done <- r
	}()
	t.Cleanup(func() { cmd.Process.Kill() })
	return func() Result {
		select {
		case r := <-done:
			return r
		case <-time.After(60 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("jail %v did not end", args)
			return Result{}
		}
	}
}

// pendingFor polls `jail pending --json`, run from another process, until
// a request for host is held, and returns its id.
func pendingFor(t *testing.T, s *Sandbox, host string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		r := s.Jail("pending", "--json")
		if r.Code != 0 {
			t.Fatalf("jail pending --json:\n%s", r)
		}
		for _, l := range lines(r.Stdout) {
			var p struct{ ID, Host, Kind string }
			if err := json.Unmarshal([]byte(l), &p); err != nil {
				t.Fatalf("jail pending --json printed %q: %v", l, err)
			}
			if p.Host == host && p.ID != "" {
				return p.ID
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no request for %s was held", host)
	return ""
}

// askConfig is the project's jail.json, with a comment a persisted answer
// must keep.
func askConfig(s *Sandbox, addr, network string, timeout int) {
	s.WriteFile(s.Project+"/jail.json", askConfigText(addr, network, timeout), 0o644)
}

func askConfigText(addr, network string, timeout int) string {
	return fmt.Sprintf(`{
  // asked hosts are held until someone answers
  "network": {
    %s
    "hosts": {"ports.test": %q, "unknown.test": %q}
  },
  "askTimeout": %d
}
`, network, addr, addr, timeout)
}

// askScript prints the session and probes https://host/path as "held".
func askScript(host, path string) string {
	return probeSh + "echo session=$JAIL_SESSION; probe held https://" + host + "/" + path
}

// TestAskNetwork attacks the ask flow end to end: a request network.ask
// names is held (the upstream sees nothing) until `jail approve` from
// another process lets it through, is refused when nobody answers within
// askTimeout, and the decision log holds both the held and the answer
// entries.
func TestAskNetwork(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		up := newUpstream(t, true, "")
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		askConfig(s, up.Addr(), `"ask": ["ports.test"],`, 60)

		wait := startJail(t, s, "--", "sh", "-c", askScript("ports.test", "approved"))
		id := pendingFor(t, s, "ports.test")
		time.Sleep(300 * time.Millisecond)
		if up.Saw("/approved") {
			t.Fatal("the held request reached the upstream before anyone answered")
		}
		if r := s.Jail("approve", id); r.Code != 0 {
			t.Fatalf("jail approve %s:\n%s", id, r)
		}
		r := wait()
		wantOK(t, getProbe(t, probes(t, r), r, "held"), "/approved")
		ds := decisions(t, s, sessionOf(t, r))
		var held, answer bool
		for _, d := range ds {
			held = held || d.Host == "ports.test" && d.Verdict == "held" && d.Rule == "ask ports.test"
			answer = answer || d.Host == "ports.test" && d.Verdict == "allow" && d.Rule == "ask once"
		}
		if !held || !answer {
			t.Errorf("the log lacks the held (%v) or the answer (%v) entry:\n%s", held, answer, dumpDecisions(ds))
		}

		askConfig(s, up.Addr(), `"ask": ["ports.test"],`, 2)
		r = s.Sh(askScript("ports.test", "unanswered"))
		wantRefusedConnect(t, getProbe(t, probes(t, r), r, "held"))
		if r.Took < 2*time.Second {
			t.Errorf("refused after %v, before the 2 s askTimeout", r.Took)
		}
		if up.Saw("/unanswered") {
			t.Error("an unanswered request reached the upstream")
		}
		ds = decisions(t, s, sessionOf(t, r))
		if d, ok := findDecision(ds, "ports.test", ""); !ok || d.Verdict != "held" {
			t.Errorf("no held entry:\n%s", dumpDecisions(ds))
		}
		timedOut := false
		for _, d := range ds {
			timedOut = timedOut || d.Host == "ports.test" && d.Verdict == "deny" && d.Rule == "ask timeout"
		}
		if !timedOut {
			t.Errorf("no denial by timeout in the log:\n%s", dumpDecisions(ds))
		}
	})
}

// TestAskUnknownProject: with network.unknown "ask" an unknown host is
// held; `jail approve ID --project` writes it into jail.json by a minimal
// edit that keeps the comment, and the next run is not asked.
func TestAskUnknownProject(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		up := newUpstream(t, true, "")
		trustCA(t, s, netPKI.get(t), "bundle.pem")
		askConfig(s, up.Addr(), `"unknown": "ask",`, 60)

		wait := startJail(t, s, "--", "sh", "-c", askScript("unknown.test", "first"))
		id := pendingFor(t, s, "unknown.test")
		if r := s.Jail("approve", id, "--project"); r.Code != 0 {
			t.Fatalf("jail approve %s --project:\n%s", id, r)
		}
		r := wait()
		wantOK(t, getProbe(t, probes(t, r), r, "held"), "/first")
		ds := decisions(t, s, sessionOf(t, r))
		var held, answer bool
		for _, d := range ds {
			held = held || d.Host == "unknown.test" && d.Verdict == "held" && d.Rule == "unknown=ask"
			answer = answer || d.Host == "unknown.test" && d.Verdict == "allow" && d.Rule == "ask project"
		}
		if !held || !answer {
			t.Errorf("the log lacks the held (%v) or the answer (%v) entry:\n%s", held, answer, dumpDecisions(ds))
		}
		b, _ := os.ReadFile(s.Project + "/jail.json")
		// The host and port asked for, appended where it belongs; the
		// comment and the layout stay.
		want := strings.Replace(askConfigText(up.Addr(), `"unknown": "ask",`, 60), `"unknown.test": "`+up.Addr()+`"}`+"\n",
			`"unknown.test": "`+up.Addr()+`"},`+"\n    \"allow\": [\n      \"unknown.test:443\"\n    ]\n", 1)
		if string(b) != want {
			t.Fatalf("jail.json after --project:\n%s\nwant the minimal edit:\n%s", b, want)
		}

		s.NoAutoTrust = true // the answer recorded the trust itself
		start := time.Now()
		r = s.Sh(askScript("unknown.test", "second"))
		wantOK(t, getProbe(t, probes(t, r), r, "held"), "/second")
		for _, d := range decisions(t, s, sessionOf(t, r)) {
			if d.Verdict == "held" {
				t.Errorf("the second run was asked again (%v): %s", time.Since(start), d)
			}
		}
	})
}
