package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/learn"
	"github.com/jailsh/jail/jail/linux"
	"github.com/jailsh/jail/proxy"
	"golang.org/x/sys/unix"
)

// observed runs a learning or watch plan and reports what the
// command did: a learned profile written and offered for merging, or, in
// watch mode, the events streamed to the decision log and a summary.
func observed(plan *linux.Plan, info *planInfo, yes bool, stderr io.Writer) int {
	obs := &linux.Observer{Want: os.Getenv("JAIL_TRACER")}
	var log *proxy.Log
	if plan.Mode == "watch" {
		var err error
		if log, err = proxy.OpenLog(plan.StateDir); err != nil {
			fmt.Fprintf(stderr, "jail: watch mode streams to the decision log: %v\n", err)
			return 125
		}
		defer log.Close()
		obs.OnEvent = func(e learn.Event) { log.Write(watchEntry(e, plan.Session, info.home)) }
	}
	if err := obs.Start(); err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	verb := map[string]string{"learning": "learning", "watch": "watching"}[plan.Mode]
	if obs.Fallback != "" {
		fmt.Fprintf(stderr, "jail: %s (tracer: seccomp; eBPF unavailable: %s)\n", verb, obs.Fallback)
	} else {
		fmt.Fprintf(stderr, "jail: %s (tracer: %s)\n", verb, obs.Used)
	}

	logFrom := proxy.LogEnd(plan.StateDir)
	code, err := linux.RunObserved(plan, stderr, obs)
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		if ee, ok := err.(*jail.ExitError); ok {
			return ee.Code
		}
		return 125
	}
	reportCreated(plan, stderr)

	events := obs.Events()
	reqs := sessionRequests(plan, logFrom)
	report := learn.Synthesize(events, reqs, learn.Facts{
		Home: info.home, Project: plan.ProjectRoot, SystemDirs: jail.SystemDirs(), Allowed: info.allowed,
		ReadOnly: jail.ReadOnlyHome(info.home),
		Exists:   func(p string) bool { _, err := os.Lstat(p); return err == nil },
	})
	if plan.Mode == "watch" {
		files, execs := 0, 0
		for _, e := range events {
			if e.Kind == learn.Exec {
				execs++
			} else {
				files++
			}
		}
		fmt.Fprint(stderr, indent(strings.Replace(report.Summary(), "Learned profile:", "As a profile it would need:", 1)))
		fmt.Fprintf(stderr, "jail: watched %d file accesses, %d execs and %d network requests (nothing written); see jail log --session %s\n", files, execs, len(reqs), plan.Session)
		return code
	}

	name := jail.LearnedName(plan.Argv)
	path := jail.LearnedPath(info.home, os.Getenv, plan.Argv)
	fmt.Fprint(stderr, indent(report.Summary()))
	if path == "" {
		fmt.Fprintln(stderr, "jail: the command has no name to file a learned profile under; nothing written")
		return code
	}
	// A run that failed (or was killed) may have stopped before it needed
	// what a working run needs, or needed something only because it went
	// wrong: its profile is for the user to read, never one later runs
	// use or jail.json gets, even with --yes.
	review := failedProfilePath(path)
	if code != 0 {
		if err := proxy.WriteFileAtomic(review, report.File(name, obs.Used), 0o600); err != nil {
			fmt.Fprintf(stderr, "jail: the command failed (exit %d); writing its learned profile for review: %v; nothing merged\n", code, err)
			return code
		}
		fmt.Fprintf(stderr, "jail: the command failed (exit %d); the learned profile is written to %s for review only, not merged; rerun when it succeeds\n", code, review)
		return code
	}
	if err := proxy.WriteFileAtomic(path, report.File(name, obs.Used), 0o600); err != nil {
		fmt.Fprintf(stderr, "jail: writing the learned profile: %v\n", err)
		return code
	}
	os.Remove(review) // a failed run's profile is stale once one succeeded
	forgetAnnounced(info.home, path)
	fmt.Fprintf(stderr, "jail: learned profile written to %s (later runs of %s use it)\n", path, name)
	if report.Profile.Empty() {
		fmt.Fprintln(stderr, "jail: it needs nothing beyond what every jail allows; nothing to merge into jail.json")
		return code
	}
	offerMerge(report.Profile, info, yes, stderr)
	return code
}

// failedProfilePath is where the profile of a failed learning run whose
// profile would go to path is written: a directory of its own, which no
// run reads profiles from.
func failedProfilePath(path string) string {
	return filepath.Join(filepath.Dir(path), "failed", filepath.Base(path))
}

// offerMerge merges the learned profile into the project's jail.json
// when the user says so (--yes, or yes at the prompt on a terminal).
func offerMerge(p learn.Profile, info *planInfo, yes bool, stderr io.Writer) {
	target := info.projectConfig
	if target == "" {
		target = filepath.Join(info.root, "jail.json")
	}
	existing, err := os.ReadFile(target)
	if err != nil && !os.IsNotExist(err) {
		fmt.Fprintf(stderr, "jail: not merged: %v\n", err)
		return
	}
	merged, err := learn.Merge(existing, p)
	if err != nil {
		fmt.Fprintf(stderr, "jail: not merged into %s: %v\n", target, err)
		return
	}
	if bytes.Equal(merged, existing) {
		fmt.Fprintf(stderr, "jail: %s already allows all of it\n", target)
		return
	}
	if !yes {
		if !isTerminal(0) || !isTerminal(2) {
			fmt.Fprintf(stderr, "jail: not merged into %s (no terminal to ask); rerun with --yes to merge\n", target)
			return
		}
		fmt.Fprintf(stderr, "Merge it into %s? [y/N] ", target)
		var answer string
		fmt.Fscanln(os.Stdin, &answer)
		if answer != "y" && answer != "Y" && answer != "yes" {
			fmt.Fprintln(stderr, "jail: not merged")
			return
		}
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(target); err == nil {
		mode = st.Mode().Perm()
	}
	if err := proxy.WriteFileAtomic(target, merged, mode); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // not the name of the temporary file
		}
		fmt.Fprintf(stderr, "jail: not merged: cannot write %s (%v); the learned profile is still used by later runs\n", target, err)
		return
	}
	// The user just approved these entries: the file as it is now is
	// theirs to trust.
	if err := jail.Trust(target, jail.ContentHash(merged), info.home, os.Getenv); err != nil {
		fmt.Fprintf(stderr, "jail: merged into %s, but recording trust failed: %v\n", target, err)
		return
	}
	fmt.Fprintf(stderr, "jail: merged into %s\n", target)
}

// sessionRequests reads the proxy's decisions of this run, logged after
// offset from.
func sessionRequests(plan *linux.Plan, from proxy.LogPos) []learn.Request {
	var reqs []learn.Request
	proxy.ReadSession(plan.StateDir, plan.Session, from, func(e proxy.Entry) bool {
		switch {
		case e.Scheme == "file" || e.Scheme == "exec" || e.Scheme == "connect":
			return true // tracer and supervisor entries, not requests
		case e.Method == "PUBLISH":
			return true // the host connecting in
		}
		reqs = append(reqs, learn.Request{Host: e.Host, Port: e.Port, Allowed: e.Verdict == "allow", Forward: e.Method == "FORWARD", Raw: e.Raw})
		return true
	})
	return reqs
}

// watchEntry is one traced access as a decision-log line.
func watchEntry(e learn.Event, session, home string) proxy.Entry {
	en := proxy.Entry{Time: time.Now(), Session: session, Client: strconv.Itoa(e.Pid), Scheme: "file", Path: e.Path, Verdict: "allow", Rule: "watch"}
	switch e.Kind {
	case learn.Open, learn.Create:
		en.Method = "READ"
		if e.Write {
			en.Method = "WRITE"
		}
	case learn.Mkdir:
		en.Method = "MKDIR"
	case learn.Unlink:
		en.Method = "UNLINK"
	case learn.Rename:
		en.Method = "RENAME"
	case learn.Exec:
		en.Scheme, en.Method = "exec", "EXEC"
	case learn.Connect:
		en.Scheme, en.Method = "connect", "CONNECT"
		if e.Addr != "" {
			en.Path = e.Addr
		}
	}
	switch {
	case e.Path != "" && learn.IsSecret(e.Path, home):
		en.Verdict, en.Reason = "deny", "secret: masked, kept denied"
	case e.Errno == int(unix.EINPROGRESS) && e.Kind == learn.Connect:
		// a non-blocking connect under way: not a failure
	case e.Errno != 0:
		en.Verdict, en.Reason = "error", unix.ErrnoName(unix.Errno(e.Errno))
	}
	return en
}

// indent prefixes the report's lines so they read as jail's, each line
// escaped: it names paths and hosts the traced run chose.
func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
		if l != "" {
			b.WriteString("jail:   " + jail.Escaped(l) + "\n")
		}
	}
	return b.String()
}

// announcedFile records which learned profiles jail has said it uses.
func announcedFile(home string) string {
	return filepath.Join(jail.StateDir(home, os.Getenv), "learned-announced.json")
}

// announceLearned says once per learned profile that a run uses it.
func announceLearned(home, path string, stderr io.Writer) {
	seen := map[string]string{}
	b, _ := os.ReadFile(announcedFile(home))
	json.Unmarshal(b, &seen)
	st, err := os.Stat(path)
	if err != nil {
		return
	}
	stamp := st.ModTime().UTC().Format(time.RFC3339Nano)
	if seen[path] == stamp {
		return
	}
	fmt.Fprintf(stderr, "jail: using learned profile %s\n", path)
	seen[path] = stamp
	if out, err := json.Marshal(seen); err == nil {
		proxy.WriteFileAtomic(announcedFile(home), out, 0o600)
	}
}

// forgetAnnounced makes the next run say again that it uses path.
func forgetAnnounced(home, path string) {
	seen := map[string]string{}
	b, err := os.ReadFile(announcedFile(home))
	if err != nil || json.Unmarshal(b, &seen) != nil {
		return
	}
	delete(seen, path)
	if out, err := json.Marshal(seen); err == nil {
		proxy.WriteFileAtomic(announcedFile(home), out, 0o600)
	}
}
