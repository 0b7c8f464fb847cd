package linux

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/control"
	"github.com/jailsh/jail/jail/learn"
	"github.com/jailsh/jail/proxy"
)

// controlPlane is a run's live control: its Hub, served on the session's
// control socket, and the proxy the Hub's rules change once it is up.
type controlPlane struct {
	hub *control.Hub
	srv atomic.Pointer[proxy.Server]
}

// startControl makes the Hub of a run that has a proxy of its own or a
// supervisor (nil for any other); listen serves it.
func startControl(plan *Plan, supervised bool) *controlPlane {
	ownProxy := plan.Net != nil && plan.Net.External == ""
	if !ownProxy && !supervised {
		return nil
	}
	cp := &controlPlane{}
	rules := control.Rules{}
	if ownProxy {
		rules.Live = cp.addRule
		rules.Persist = func(scope string, allow bool, host string) error { return persistRule(plan, scope, allow, host) }
	}
	timeout := plan.AskTimeout
	if timeout <= 0 {
		timeout = control.DefaultTimeout
	}
	cp.hub = control.NewHub(control.HubConfig{Info: controlInfo(plan, timeout), Timeout: timeout, Rules: rules})
	return cp
}

// listen serves the Hub on the session's control socket. A policy that
// asks a person (command.ask, network rules that ask) needs it: without it
// no one could answer, so the run is refused. Any other run goes on
// without live control, said on stderr.
func (cp *controlPlane) listen(plan *Plan, stderr io.Writer) error {
	if cp == nil {
		return nil
	}
	err := cp.hub.Listen(control.Dir())
	switch {
	case err == nil:
		return nil
	case asksPeople(plan):
		return fmt.Errorf("%w (the policy asks before allowing, and no one could answer without it)", err)
	}
	fmt.Fprintf(stderr, "jail: live control is off for this run: %s\n", jail.Escaped(err.Error()))
	return nil
}

// asksPeople reports whether the plan holds anything for a person's
// answer.
func asksPeople(plan *Plan) bool {
	return len(plan.CommandAsk) > 0 || (plan.Net != nil && (plan.Net.Rules.Unknown == "ask" || len(plan.Net.Rules.Ask) > 0))
}

// close ends the session's live control: held requests are denied,
// watchers told, the socket removed.
func (cp *controlPlane) close() {
	if cp != nil {
		cp.hub.Close()
	}
}

// addRule adds a rule to the running proxy.
func (cp *controlPlane) addRule(allow bool, host string) error {
	srv := cp.srv.Load()
	if srv == nil {
		return errors.New("the proxy of this session is not running yet; try again")
	}
	return srv.AddRule(allow, host)
}

// proxyHooks fills the proxy's Ask and OnRecord from cp (nothing for a
// nil cp: no one to ask, nothing streamed).
func (cp *controlPlane) proxyHooks(cfg *proxy.Config) {
	if cp == nil {
		return
	}
	cfg.Ask, cfg.OnRecord = cp.askNetwork, cp.hub.Record
}

// served is told the proxy is up: live rules go to it from now on.
func (cp *controlPlane) served(srv *proxy.Server) {
	if cp != nil && srv != nil {
		cp.srv.Store(srv)
	}
}

// askNetwork holds a connection the proxy's rules ask about until the
// Hub has an answer.
func (cp *controlPlane) askNetwork(ctx context.Context, q proxy.Question) proxy.Verdict {
	a := cp.hub.Ask(ctx, control.Request{Kind: control.KindNetwork, Rule: q.Rule, Host: q.Host, Port: q.Port, Scheme: q.Scheme})
	return verdictOf(a)
}

// verdictOf is the proxy's Verdict for an Answer: the log's rule says how
// it was answered, its reason who answered.
func verdictOf(a control.Answer) proxy.Verdict {
	v := proxy.Verdict{Allow: a.Allow, Reason: a.By}
	switch a.By {
	case "timeout", "ended", "limit":
		v.Allow, v.Rule = false, "ask "+a.By
		v.Reason = map[string]string{"timeout": "no answer in time", "ended": "the session ended", "limit": "too many requests held"}[a.By]
	default:
		scope := a.Scope
		if scope == "" {
			scope = control.ScopeOnce
		}
		v.Rule = "ask " + scope
	}
	return v
}

// watchActivity streams the tracer's events to the Hub as well as to
// what obs already calls; it must be set before the tracer starts.
func (cp *controlPlane) watchActivity(obs *Observer) {
	if cp == nil || obs == nil {
		return
	}
	prev := obs.OnEvent
	obs.OnEvent = func(e learn.Event) {
		if prev != nil {
			prev(e)
		}
		cp.hub.Activity(control.Activity{Time: time.Now(), Kind: string(e.Kind), Path: e.Path, Addr: e.Addr, Write: e.Write, Errno: e.Errno, PID: e.Pid})
	}
}

// superviseHooks hands the supervisor the Hub: execs that command.ask
// names are held there, and refused execs are counted and streamed.
func (cp *controlPlane) superviseHooks(sup *supervisor) {
	if cp == nil || sup == nil {
		return
	}
	sup.ask, sup.record = cp.hub.Ask, cp.hub.Record
}

// controlInfo describes the run for jail ps and the dashboard.
func controlInfo(plan *Plan, timeout time.Duration) control.Info {
	home := homeDir()
	info := control.Info{ID: plan.Session, Command: plan.Argv, Project: plan.ProjectRoot, Cwd: plan.Cwd,
		Started: time.Now(), PID: os.Getpid(), Mode: plan.Mode,
		User: filepath.Join(jail.UserConfigDir(home, os.Getenv), "config.json"), Policy: policyOf(plan, timeout)}
	if p := projectConfig(plan); fileExists(p) {
		info.Config = p
	}
	return info
}

// policyOf is the plan's policy in short form.
func policyOf(plan *Plan, timeout time.Duration) control.Policy {
	p := control.Policy{CommandDeny: plan.CommandDeny, CommandAsk: plan.CommandAsk, AskTimeout: timeout.Seconds(), NoNetwork: plan.Net == nil}
	if n := plan.Net; n != nil {
		p.Unknown, p.Allow, p.Deny, p.Ask = n.Rules.Unknown, n.Rules.Allow, n.Rules.Deny, n.Rules.Ask
		if p.Unknown == "" {
			p.Unknown = "deny"
		}
	}
	for _, o := range plan.Ops {
		switch o.Kind {
		case "bind":
			p.Writable = append(p.Writable, o.Dest)
		case "mask", "mask-dir":
			p.Masked++
		}
	}
	return p
}

// persistRule writes an answer for the project (its jail.json, made at
// the project root when it has none) or for the user (config.json).
func persistRule(plan *Plan, scope string, allow bool, host string) error {
	key := "network.deny"
	if allow {
		key = "network.allow"
	}
	home := homeDir()
	switch scope {
	case control.ScopeProject:
		return jail.PersistRule(projectConfig(plan), key, host, true, home, os.Getenv)
	case control.ScopeUser:
		return jail.PersistRule(filepath.Join(jail.UserConfigDir(home, os.Getenv), "config.json"), key, host, false, home, os.Getenv)
	}
	return fmt.Errorf("rules are written for the project or the user, not for scope %q", scope)
}

// projectConfig is the project's jail.json: at the project root, which is
// the directory of the jail.json found when there is one.
func projectConfig(plan *Plan) string { return filepath.Join(plan.ProjectRoot, "jail.json") }

// homeDir is the user's home, as the run's policy saw it.
func homeDir() string {
	if h := os.Getenv("HOME"); filepath.IsAbs(h) {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}
