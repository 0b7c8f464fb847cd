package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/control"
	"github.com/jailsh/jail/proxy"
	"github.com/spf13/pflag"
)

// liveSession is one running session: its client and its status.
type liveSession struct {
	c  *control.Client
	st *control.Status
}

// callTimeout bounds each call of the CLI to a session.
const callTimeout = 5 * time.Second

// sessions lists this user's running sessions, oldest first; only the one
// whose id is (or starts with) id when id is set.
func sessions(id string) ([]liveSession, error) {
	cs, err := control.Sessions(control.Dir())
	if err != nil {
		return nil, err
	}
	var out []liveSession
	for _, c := range cs {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		st, err := c.Status(ctx)
		cancel()
		if err != nil || (id != "" && !strings.HasPrefix(st.ID, id)) {
			continue
		}
		out = append(out, liveSession{c, st})
	}
	return out, nil
}

// psCmd lists the running sessions: `jail ps [--json]`.
func psCmd(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("jail ps", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "one JSON object per session and line")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError(stderr, "ps", err, "jail ps [--json]")
	}
	ss, err := sessions("")
	if err != nil {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(err.Error()))
		return 125
	}
	if *asJSON {
		for _, s := range ss {
			printJSON(stdout, s.st)
		}
		return 0
	}
	fmt.Fprintf(stdout, "%-16s  %-32s  %-32s  %-8s  %7s  %6s  %7s\n", "ID", "COMMAND", "PROJECT", "STARTED", "ALLOWED", "DENIED", "PENDING")
	for _, s := range ss {
		st := s.st
		fmt.Fprintf(stdout, "%-16s  %-32s  %-32s  %-8s  %7d  %6d  %7d\n", jail.Escaped(st.ID), clip(jail.Escaped(strings.Join(st.Command, " ")), 32),
			clip(jail.Escaped(st.Project), 32), started(st.Started), st.Counts.Allowed, st.Counts.Denied, st.Counts.Pending)
	}
	return 0
}

// started is a start time for a table: the time of day today, else the
// date.
func started(t time.Time) string {
	t = t.Local()
	if y, m, d := t.Date(); y == time.Now().Year() && m == time.Now().Month() && d == time.Now().Day() {
		return t.Format("15:04:05")
	}
	return t.Format("Jan 02")
}

// clip shortens s to n characters, marking the cut.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// ruleCmd changes running sessions: `jail allow|deny HOST [--session ID]
// [--project|--user]`. The config is written once, here, and every
// session gets the live rule.
func ruleCmd(allow bool, args []string, stdout, stderr io.Writer) int {
	name := map[bool]string{true: "allow", false: "deny"}[allow]
	use := "jail " + name + " HOST [--session ID] [--project|--user]"
	fs := pflag.NewFlagSet("jail "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	id := fs.String("session", "", "only session `ID`")
	project := fs.Bool("project", false, "also write it into the project's jail.json")
	user := fs.Bool("user", false, "also write it into your config.json")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || (*project && *user) {
		return usageError(stderr, name, err, use)
	}
	host := fs.Arg(0)
	if err := (proxy.Rules{Allow: []string{host}}).Validate(); err != nil {
		fmt.Fprintf(stderr, "jail: %s: %q is not a host entry; give a name, *.domain or an IP, with an optional :port\n", name, jail.Escaped(host))
		return 125
	}
	ss, err := sessions(*id)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(err.Error()))
		return 125
	}
	if *id != "" && len(ss) == 0 {
		fmt.Fprintf(stderr, "jail: no running session %s; see jail ps\n", jail.Escaped(*id))
		return 1
	}
	written := false
	if *project || *user {
		path, err := persistTarget(*project, ss)
		if err == nil {
			err = persist(path, allow, host, *project)
		}
		if err != nil {
			fmt.Fprintf(stderr, "jail: %s: %s\n", name, jail.Escaped(err.Error()))
			return 1
		}
		fmt.Fprintf(stdout, "%s %s written into %s\n", name, jail.Escaped(host), jail.Escaped(path))
		written = true
	}
	if len(ss) == 0 && !written {
		fmt.Fprintf(stderr, "jail: no running session of yours to %s %s in; start one, or add --project or --user to write it\n", name, jail.Escaped(host))
		return 1
	}
	failed := 0
	for _, s := range ss {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := s.c.Rule(ctx, allow, host, control.ScopeSession)
		cancel()
		if err != nil {
			failed++
			fmt.Fprintf(stderr, "jail: session %s: %s\n", jail.Escaped(s.st.ID), jail.Escaped(err.Error()))
			continue
		}
		fmt.Fprintf(stdout, "%s %s in session %s\n", name, jail.Escaped(host), jail.Escaped(s.st.ID))
	}
	if failed == len(ss) && !written {
		return 1
	}
	return 0
}

// persistTarget is the config a rule is written into: the jail.json of
// the project of the one session named, else of the cwd's project, or
// the user's config.json.
func persistTarget(project bool, ss []liveSession) (string, error) {
	home, err := jail.HomeDir()
	if err != nil {
		return "", err
	}
	if !project {
		return filepath.Join(jail.UserConfigDir(home, os.Getenv), "config.json"), nil
	}
	if len(ss) == 1 && ss[0].st.Project != "" {
		return filepath.Join(ss[0].st.Project, "jail.json"), nil
	}
	cwd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("finding the project: %w", err)
	}
	_, root := jail.FindProject(cwd, home)
	return filepath.Join(root, "jail.json"), nil
}

// persist writes the rule into the config at path.
func persist(path string, allow bool, host string, project bool) error {
	home, err := jail.HomeDir()
	if err != nil {
		return err
	}
	key := "network.deny"
	if allow {
		key = "network.allow"
	}
	return jail.PersistRule(path, key, host, project, home, os.Getenv)
}

// pendingCmd lists what the sessions hold: `jail pending [--json]
// [--session ID]`.
func pendingCmd(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("jail pending", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	asJSON := fs.Bool("json", false, "one JSON object per held request and line")
	id := fs.String("session", "", "only session `ID`")
	if err := fs.Parse(args); err != nil || fs.NArg() > 0 {
		return usageError(stderr, "pending", err, "jail pending [--json] [--session ID]")
	}
	ss, err := sessions(*id)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(err.Error()))
		return 125
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%-24s  %-7s  %-40s  %-24s  %4s  %s\n", "ID", "KIND", "WHAT", "RULE", "WAIT", "LEFT")
	}
	for _, s := range ss {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		reqs, err := s.c.Pending(ctx)
		cancel()
		if err != nil {
			fmt.Fprintf(stderr, "jail: session %s: %s\n", jail.Escaped(s.st.ID), jail.Escaped(err.Error()))
			continue
		}
		for _, r := range reqs {
			if *asJSON {
				printJSON(stdout, r)
				continue
			}
			left := time.Until(r.Deadline).Round(time.Second)
			fmt.Fprintf(stdout, "%-24s  %-7s  %-40s  %-24s  %4d  %s\n", jail.Escaped(r.ID), jail.Escaped(r.Kind), jail.Escaped(requestWhat(r)), jail.Escaped(r.Rule), r.Waiting, left)
		}
	}
	return 0
}

// requestWhat is what a held request asks for, for people: the host and
// port, or the argv (each argument quoted when it needs it) in its
// directory.
func requestWhat(r control.Request) string {
	if r.Kind != control.KindCommand {
		return fmt.Sprintf("%s %s:%d", r.Scheme, r.Host, r.Port)
	}
	args := make([]string, len(r.Argv))
	for i, a := range r.Argv {
		args[i] = a
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?[]{}#~") {
			args[i] = fmt.Sprintf("%q", a)
		}
	}
	return strings.Join(args, " ") + " (in " + r.Cwd + ")"
}

// answerCmd answers a held request: `jail approve|reject ID
// [--session|--project|--user]`.
func answerCmd(allow bool, args []string, stdout, stderr io.Writer) int {
	name := map[bool]string{true: "approve", false: "reject"}[allow]
	use := "jail " + name + " ID [--session|--project|--user]"
	fs := pflag.NewFlagSet("jail "+name, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	forSession := fs.Bool("session", false, "for the rest of the session")
	project := fs.Bool("project", false, "always, for this project (written into its jail.json)")
	user := fs.Bool("user", false, "always, for you (written into your config.json)")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 || count(*forSession, *project, *user) > 1 {
		return usageError(stderr, name, err, use)
	}
	id := fs.Arg(0)
	scope := control.ScopeOnce
	switch {
	case *forSession:
		scope = control.ScopeSession
	case *project:
		scope = control.ScopeProject
	case *user:
		scope = control.ScopeUser
	}
	prefix, _, ok := strings.Cut(id, "-")
	if !ok || prefix == "" {
		fmt.Fprintf(stderr, "jail: %s: %q is not the id of a held request; see jail pending\n", name, jail.Escaped(id))
		return 125
	}
	ss, err := sessions(prefix)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %s\n", jail.Escaped(err.Error()))
		return 125
	}
	var last error
	for _, s := range ss {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := s.c.Answer(ctx, id, control.Answer{Allow: allow, Scope: scope, By: "jail " + name})
		cancel()
		if err == nil {
			fmt.Fprintf(stdout, "%s %s (%s)\n", map[bool]string{true: "approved", false: "rejected"}[allow], jail.Escaped(id), scope)
			return 0
		}
		last = err
	}
	if last == nil {
		last = errors.New("no held request " + id)
	}
	fmt.Fprintf(stderr, "jail: %s: %s; see jail pending\n", name, jail.Escaped(last.Error()))
	return 1
}

func count(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// usageError reports a bad command line in one line.
func usageError(stderr io.Writer, name string, err error, use string) int {
	why := "wrong arguments"
	if err != nil {
		why = err.Error()
	}
	fmt.Fprintf(stderr, "jail: %s: %s; usage: %s\n", name, jail.Escaped(why), use)
	return 125
}

func printJSON(w io.Writer, v any) {
	b, _ := json.Marshal(v)
	fmt.Fprintf(w, "%s\n", b)
}
