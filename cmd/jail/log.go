package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
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
			b, _ := json.Marshal(e)
			fmt.Fprintf(stdout, "%s\n", b)
			return
		}
		fmt.Fprintln(stdout, formatEntry(e))
	}
	if !*asJSON {
		fmt.Fprintf(stdout, "%-8s  %-16s  %-5s  %-7s  %-32s  %s\n", "TIME", "SESSION", "VERDICT", "METHOD", "DESTINATION", "RULE / REASON")
	}
	path := filepath.Join(dir, "decisions.jsonl")
	f, err := os.Open(path)
	if os.IsNotExist(err) && !*follow {
		return 0 // nothing decided yet
	}
	var offset int64
	if err == nil {
		if *follow && *session == "" {
			// As tail -f: the last ten, then what comes.
			var last []proxy.Entry
			offset = readFrom(f, 0, func(e proxy.Entry) {
				if last = append(last, e); len(last) > 10 {
					last = last[1:]
				}
			})
			for _, e := range last {
				show(e)
			}
		} else {
			offset = readFrom(f, 0, show)
		}
		f.Close()
	}
	for *follow {
		time.Sleep(200 * time.Millisecond)
		if f, err := os.Open(path); err == nil {
			offset = readFrom(f, offset, show)
			f.Close()
		}
	}
	return 0
}

// readFrom prints the whole lines after offset and returns the new offset.
func readFrom(f *os.File, offset int64, show func(proxy.Entry)) int64 {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return offset
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return offset
	}
	end := strings.LastIndexByte(string(b), '\n') + 1 // a line being written waits
	for _, line := range strings.Split(string(b[:end]), "\n") {
		var e proxy.Entry
		if line != "" && json.Unmarshal([]byte(line), &e) == nil {
			show(e)
		}
	}
	return offset + int64(end)
}

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
	session := e.Session
	if len(session) > 16 {
		session = session[:16]
	}
	return fmt.Sprintf("%-8s  %-16s  %-7s  %-7s  %-32s  %s", e.Time.Local().Format("15:04:05"), session, strings.ToUpper(e.Verdict), e.Method, dest, why)
}
