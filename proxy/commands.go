package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
)

// wireCommands are the command.deny rules (Config.DenyCommands) that the
// proxy can recognise on the wire: each field is the normalised rule that
// denies the action, or "" when none does.
type wireCommands struct {
	// gitPush: "git push", "git send-pack" (the plumbing a push runs) or
	// "git" alone.
	gitPush string
	// npmPublish: "npm publish", "pnpm publish", "yarn publish",
	// "yarn npm publish", or "npm", "pnpm", "yarn" alone. All of them
	// publish with the same registry request, which does not say which
	// client sent it.
	npmPublish string
}

// parseDenyCommands picks out of rules (command.deny strings) those that
// the wire can enforce. A rule is normalised as the exec-time rules are:
// words split on white space, the program reduced to its base name
// ("/usr/bin/git  push" is "git push"). A program alone implies all of
// its subcommands. A rule more specific than the action ("git push
// --force", "git push origin main") is not enforced on the wire, which
// cannot tell those pushes from others; nor is any rule about other
// commands. When several rules deny one action, the most specific names
// it, the first of those in list order.
func parseDenyCommands(rules []string) wireCommands {
	var w wireCommands
	var gitArgs, npmArgs int
	for _, s := range rules {
		f := strings.Fields(s)
		if len(f) == 0 {
			continue
		}
		if f[0] = filepath.Base(f[0]); f[0] == "/" || f[0] == "." {
			continue
		}
		rule, prog, args := strings.Join(f, " "), f[0], strings.Join(f[1:], " ")
		switch {
		case prog == "git" && (args == "" || args == "push" || args == "send-pack"):
			if w.gitPush == "" || len(f) > gitArgs {
				w.gitPush, gitArgs = rule, len(f)
			}
		case (prog == "npm" || prog == "pnpm" || prog == "yarn") && (args == "" || args == "publish") ||
			prog == "yarn" && args == "npm publish":
			if w.npmPublish == "" || len(f) > npmArgs {
				w.npmPublish, npmArgs = rule, len(f)
			}
		}
	}
	return w
}

// gitPushRequest reports whether req is a step of a git push over smart
// HTTP: the ref advertisement (GET …/info/refs?service=git-receive-pack)
// or the pack upload (POST …/git-receive-pack, whose body is typed
// application/x-git-receive-pack-request). Any method to a path that
// ends in git-receive-pack counts; letter case is ignored. A fetch
// (git-upload-pack) is not a push.
func gitPushRequest(req *http.Request) bool {
	p := strings.ToLower(strings.TrimRight(req.URL.Path, "/"))
	if strings.HasSuffix(p, "/git-receive-pack") {
		return true
	}
	if strings.HasSuffix(p, "/info/refs") {
		q := req.URL.RawQuery
		if u, err := url.QueryUnescape(q); err == nil {
			q = u
		}
		if strings.Contains(strings.ToLower(q), "git-receive-pack") {
			return true
		}
	}
	for _, f := range []string{"Content-Type", "Accept"} {
		for _, v := range req.Header.Values(f) {
			if strings.Contains(strings.ToLower(v), "application/x-git-receive-pack-") {
				return true
			}
		}
	}
	return false
}

// maxPublishBody is the largest PUT body read whole to tell an npm
// publish from other uploads.
const maxPublishBody = maxSecretBody

// publishRequest tells whether req (a PUT with a body) publishes an npm
// package, and returns the reason to log when it does. npm, pnpm and
// yarn publish with one PUT to the registry's URL for the package
// (/name or /@scope%2fname, under the registry's path), whose JSON body
// is the package document with the tarball inline in "_attachments".
//
// The body is read, up to maxPublishBody+1 bytes, and put back in front
// of the rest, so the request can go on unchanged:
//
//   - a body up to maxPublishBody that is a JSON object is a publish when
//     it has a top-level "_attachments" key, whatever the path;
//   - a body that cannot be inspected (larger than maxPublishBody, not
//     valid JSON, or sent with a Content-Encoding) to a path that looks
//     like a package's is refused as a possible publish, unless its first
//     byte shows that it is not a JSON object: a registry could not read
//     it as one either;
//   - everything else passes: a dist-tag change (PUT
//     /-/package/<name>/dist-tags/<tag>, a JSON string), the package
//     document updates of npm deprecate, owner and unpublish (PUT
//     /<name>/-rev/<rev>, without attachments), and uploads that are not
//     JSON objects.
//
// A JSON object PUT with a top-level "_attachments" (a CouchDB document
// with inline attachments) is refused too: it is the same shape.
func publishRequest(req *http.Request) (string, error) {
	pkg := packagePath(req.URL.Path)
	if ce := strings.TrimSpace(req.Header.Get("Content-Encoding")); ce != "" && !strings.EqualFold(ce, "identity") {
		if pkg {
			return "possible npm publish: a PUT to a package path with a content-encoded body, which is not inspected", nil
		}
		return "", nil
	}
	orig := req.Body
	b, err := readUpTo(orig, req.ContentLength, maxPublishBody)
	if err != nil {
		return "", err
	}
	if len(b) <= maxPublishBody {
		req.Body = &readCloser{Reader: bytes.NewReader(b), c: orig}
		var doc map[string]json.RawMessage
		if json.Unmarshal(b, &doc) == nil {
			if _, ok := doc["_attachments"]; ok {
				return "npm publish: a PUT of a package document with _attachments", nil
			}
			return "", nil
		}
	} else {
		req.Body = &readCloser{Reader: io.MultiReader(bytes.NewReader(b), orig), c: orig}
	}
	if !mayBeJSONObject(b) {
		return "", nil
	}
	if bytes.Contains(b, []byte(`"_attachments"`)) {
		return "npm publish: a PUT of a package document with _attachments", nil
	}
	if !pkg {
		return "", nil
	}
	if len(b) > maxPublishBody {
		return fmt.Sprintf("possible npm publish: a PUT to a package path with a body over %d MiB, which is not inspected", maxPublishBody>>20), nil
	}
	return "possible npm publish: a PUT to a package path with a body that is not valid JSON", nil
}

// mayBeJSONObject reports whether b could be read as a JSON object by a
// lenient parser: after white space and a UTF-8 byte order mark it
// starts with "{", or it looks like UTF-16 or UTF-32 (a NUL byte or
// another byte order mark first).
func mayBeJSONObject(b []byte) bool {
	b = bytes.TrimPrefix(bytes.TrimLeft(b, " \t\r\n"), []byte("\xef\xbb\xbf"))
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return false
	}
	switch b[0] {
	case '{', 0x00, 0xfe, 0xff:
		return true
	}
	return false
}

// packagePath reports whether a (decoded) URL path could be a registry's
// URL for a package document: its last segment is a package name
// (letters, digits, "-", ".", "_", "~", not starting with "." or "_"),
// possibly after an "@scope" segment, and no segment starts with "-",
// as the registry's other endpoints do (/-/…, /<name>/-rev/…).
func packagePath(p string) bool {
	segs := strings.Split(strings.TrimPrefix(p, "/"), "/")
	for _, s := range segs {
		if strings.HasPrefix(s, "-") {
			return false
		}
	}
	name := segs[len(segs)-1]
	if name == "" || name[0] == '.' || name[0] == '_' || len(name) > 214 {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~') {
			return false
		}
	}
	return true
}

// refuseCommand answers and logs a request refused by a command rule.
func (s *Server) refuseCommand(bw *bufio.Writer, e Entry, action, rule, reason string) bool {
	e.Verdict, e.Rule, e.Reason = verdictDeny, "command.deny "+rule, reason
	s.record(e)
	writeText(bw, http.StatusForbidden, commandMessage(action, rule))
	return false
}

func commandMessage(action, rule string) string {
	return fmt.Sprintf("jail: %s is denied by command.deny (%q)\n", action, rule)
}

// sshPort22 refuses a tunnel (CONNECT or SOCKS) to port 22 while git push
// is denied: git pushes over SSH there. An Allow entry that names the
// host with ":22" lets it through.
func (s *Server) sshPort22(h host, port int) *refusal {
	if s.cmds.gitPush == "" || port != 22 || s.rules.Load().explicitlyAllowed(h, port) {
		return nil
	}
	return &refusal{verdict: verdictDeny, rule: "command.deny " + s.cmds.gitPush,
		reason: "ssh to port 22 while git push is denied",
		hint: fmt.Sprintf("git push is denied by command.deny (%q); to allow ssh to this host, add %q to jail.json \"network.allow\"",
			s.cmds.gitPush, net.JoinHostPort(h.name, "22"))}
}

// sshHello reports, for a tunnel that is not TLS or HTTP, whether the
// client began with an SSH identification string ("SSH-2.0-…"), waiting
// at most the sniffing time for its first four bytes.
func (s *Server) sshHello(c net.Conn, br *bufio.Reader) bool {
	if b, _ := br.Peek(br.Buffered()); len(b) > 0 && b[0] != 'S' {
		return false
	}
	b, _ := peekWithin(c, br, 4, sniffTimeout)
	return string(b) == "SSH-"
}

// refuseSSH ends a tunnel in which the client speaks SSH to a port other
// than 22 (ssh.github.com:443, for one) while git push is denied, unless
// an Allow entry names the host with that port. It reports whether it
// did.
func (s *Server) refuseSSH(c net.Conn, br *bufio.Reader, t *target, e Entry) bool {
	if s.cmds.gitPush == "" || s.rules.Load().explicitlyAllowed(t.norm, t.port) || !s.sshHello(c, br) {
		return false
	}
	s.denySSH(c, t, e)
	return true
}

// denySSH logs an SSH tunnel refused while git push is denied and tells
// the client why: an SSH client shows or logs lines that come before the
// server's identification string.
func (s *Server) denySSH(c net.Conn, t *target, e Entry) {
	hp := t.addr()
	e.Verdict, e.Rule = verdictDeny, "command.deny "+s.cmds.gitPush
	e.Reason = fmt.Sprintf("ssh to port %d while git push is denied", t.port)
	s.record(e)
	io.WriteString(c, fmt.Sprintf("jail: %s: ssh while git push is denied by command.deny (%q); to allow it, add %q to jail.json \"network.allow\"\r\n",
		hp, s.cmds.gitPush, hp))
}

// sshAfterBanner handles a raw tunnel whose client waits for the server
// to speak, while git push is denied and the host is not explicitly
// allowed on this port ("unknown": "allow" lets such a stream through):
// when the server opens with an SSH identification string, the banner
// goes through and the client's answer is checked before any of it
// reaches the server; an SSH client's is refused. The returned conn
// replays what was read from the server; e counts the banner sent.
func (s *Server) sshAfterBanner(c net.Conn, br *bufio.Reader, up net.Conn, t *target, e *Entry) (net.Conn, bool) {
	if s.cmds.gitPush == "" || s.rules.Load().explicitlyAllowed(t.norm, t.port) {
		return up, false
	}
	ur := bufio.NewReader(up)
	b, _ := peekWithin(up, ur, 4, sniffTimeout)
	rc := &upstreamConn{Conn: up, r: ur}
	if string(b) != "SSH-" {
		return rc, false
	}
	// An identification line is at most 255 bytes: ReadSlice holds no
	// more than its buffer, and what it read goes on to the client.
	banner, err := ur.ReadSlice('\n')
	n, _ := c.Write(banner)
	e.BytesDown += int64(n)
	if err != nil {
		return rc, false
	}
	first, _ := peekWithin(c, br, 4, dialTimeout)
	if string(first) != "SSH-" {
		return rc, false
	}
	up.Close()
	s.denySSH(c, t, *e)
	return rc, true
}
