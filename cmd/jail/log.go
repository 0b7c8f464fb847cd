package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/proxy"
	"github.com/spf13/pflag"
)

// logCmd shows the decision log: `jail log [-f] [--json] [--session ID]`.
func logCmd(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("jail log", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	follow := fs.BoolP("follow", "f", false, "keep printing new decisions as they are made")
	asJSON := fs.Bool("json", false, "print raw JSON lines")
	session := fs.String("session", "", "only decisions of session `ID`")
	if err := fs.Parse(args); err != nil {
		fmt.Fprintf(stderr, "jail: log: %v; usage: jail log [-f] [--json] [--session ID]\n", err)
		return 125
	}
	home, err := jail.HomeDir()
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v\n", err)
		return 125
	}
	dir := jail.StateDir(home, os.Getenv)
	show := func(e proxy.Entry) {
		if *session != "" && e.Session != *session {
			return
		}
		if *asJSON {
			b, _ := proxy.EntryJSON(e)
			fmt.Fprintf(stdout, "%s\n", b)
			return
		}
		fmt.Fprintln(stdout, formatEntry(e))
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%-8s  %-16s  %-5s  %-7s  %-32s  %s\n", "TIME", "SESSION", "VERDICT", "METHOD", "DESTINATION", "RULE / REASON")
	}
	c, err := proxy.OpenLogCursor(dir, proxy.LogPos{})
	if err != nil {
		fmt.Fprintf(stderr, "jail: %v; check the permissions of %s\n", err, dir)
		return 125
	}
	defer c.Close()
	if *follow && *session == "" {
		// As tail -f: the last ten, then what comes.
		var last []proxy.Entry
		readEntries(c, func(e proxy.Entry) {
			if last = append(last, e); len(last) > 10 {
				last = last[1:]
			}
		})
		for _, e := range last {
			show(e)
		}
	} else {
		readEntries(c, show)
	}
	for *follow {
		time.Sleep(200 * time.Millisecond)
		readEntries(c, show)
	}
	return 0
}

// readEntries shows the entries the cursor has now, across the log's
// rotations; a line that is not an entry is skipped.
func readEntries(c *proxy.LogCursor, show func(proxy.Entry)) {
	c.Lines(func(line []byte) bool {
		var e proxy.Entry
		if json.Unmarshal(line, &e) == nil {
			show(e)
		}
		return true
	})
}

// formatEntry is e as a row of the table, every field the jailed run
// chose escaped (see jail.Escaped): a path, host name or argv carrying
// ESC must not drive the terminal.
func formatEntry(e proxy.Entry) string {
	dest := e.Host
	if e.Port != 0 {
		dest = fmt.Sprintf("%s:%d", e.Host, e.Port)
	}
	if e.Method == "EXEC" {
		dest = e.Path // the argv
	} else if e.Path != "" {
		dest += e.Path
	}
	why := e.Rule
	if e.Reason != "" {
		why += " (" + e.Reason + ")"
	}
	if len(e.Injected) > 0 {
		why += "; injected " + strings.Join(e.Injected, ", ")
	}
	if len(e.Kept) > 0 {
		why += "; placeholder kept: " + strings.Join(e.Kept, ", ")
	}
	session := e.Session
	if len(session) > 16 {
		session = session[:16]
	}
	esc := jail.Escaped
	return fmt.Sprintf("%-8s  %-16s  %-7s  %-7s  %-32s  %s", e.Time.Local().Format("15:04:05"), esc(session), esc(strings.ToUpper(e.Verdict)), esc(e.Method), esc(dest), esc(why))
}
