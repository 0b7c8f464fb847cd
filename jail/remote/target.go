// Package remote runs the same jail on another Linux host over the
// system's ssh: the target, the ssh command lines, the connection, the
// jail binary's upload and the spec the remote side runs.
package remote

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/jailsh/jail/jail"
)

// Target is where jail --remote runs: a host (a name, an address or an
// ssh config alias, resolved by ssh itself), an optional login name and
// port, and the project's directory there.
type Target struct {
	Name string // the named host of the user config, "" for [user@]host[:port]
	User string // "" for ssh's choice
	Host string
	Port int    // 0 for ssh's choice
	Dir  string // the project's remote directory pattern, "" for DefaultDir
}

// DefaultDir is where a project goes on the remote when its named host
// names no directory: ~/ is the remote user's home, {project} the
// project's key.
const DefaultDir = "~/.local/share/jail/work/" + jail.ProjectToken

// ParseTarget reads --remote: a host named in the user config, else
// [user@]host[:port] (an IPv6 address in brackets). Every part must be
// a plain name, so that ssh cannot read it as an option.
func ParseTarget(s string, named map[string]jail.RemoteHost) (Target, error) {
	if h, ok := named[s]; ok {
		return Target{Name: s, User: h.User, Host: h.Host, Port: h.Port, Dir: h.Dir}, nil
	}
	var t Target
	rest := s
	if u, h, ok := strings.Cut(rest, "@"); ok {
		t.User, rest = u, h
		if !plainWord(t.User) {
			return Target{}, fmt.Errorf("--remote %s: the user %s is not a plain login name", jail.Shown(s), jail.Shown(t.User))
		}
	}
	host, port, err := splitHostPort(rest)
	if err != nil {
		return Target{}, fmt.Errorf("--remote %s: %w", jail.Shown(s), err)
	}
	t.Host, t.Port = host, port
	return t, nil
}

// splitHostPort splits host[:port] and [v6addr][:port].
func splitHostPort(s string) (string, int, error) {
	host, portText := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 || strings.Trim(s[1:end], "0123456789abcdefABCDEF:.") != "" || end == 1 {
			return "", 0, fmt.Errorf("%s is not an [IPv6] address", jail.Shown(s))
		}
		host, portText = s[1:end], strings.TrimPrefix(s[end+1:], ":")
		if s[end+1:] != "" && !strings.HasPrefix(s[end+1:], ":") {
			return "", 0, fmt.Errorf("%s: only :PORT may follow the address", jail.Shown(s))
		}
	} else {
		if h, p, ok := strings.Cut(s, ":"); ok {
			host, portText = h, p
		}
		if !plainWord(host) {
			return "", 0, fmt.Errorf("the host %s is not a host name, address or ssh alias (letters, digits, '.', '_', '-', not starting with '-')", jail.Shown(host))
		}
	}
	port := 0
	if portText != "" || strings.HasSuffix(s, ":") {
		p, err := strconv.Atoi(portText)
		if err != nil || p < 1 || p > 65535 || strings.Trim(portText, "0123456789") != "" {
			return "", 0, fmt.Errorf("the port %s is not 1-65535", jail.Shown(portText))
		}
		port = p
	}
	return host, port, nil
}

// plainWord is a name ssh reads only as a name: no option dash, no
// spaces, no shell or ssh token characters.
func plainWord(s string) bool {
	if s == "" || s[0] == '-' || len(s) > 253 {
		return false
	}
	return strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-") == ""
}

// String is the target as ssh's destination: [user@]host.
func (t Target) String() string {
	if t.User != "" {
		return t.User + "@" + t.Host
	}
	return t.Host
}

// Shown is the target as messages name it, with its port.
func (t Target) Shown() string {
	s := t.String()
	if t.Port != 0 {
		s += ":" + strconv.Itoa(t.Port)
	}
	if t.Name != "" && t.Name != t.Host {
		s = t.Name + " (" + s + ")"
	}
	return s
}

// RemoteDir is the project's directory on the remote for the local
// project root: the target's pattern (DefaultDir without one) with
// {project} replaced; it starts with ~/ when under the remote home.
func (t Target) RemoteDir(root string) string {
	d := t.Dir
	if d == "" {
		d = DefaultDir
	}
	return strings.ReplaceAll(d, jail.ProjectToken, jail.ProjectKey(root))
}
