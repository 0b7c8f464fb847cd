package jail

import (
	"bytes"
	"io"
	"os"
	"sort"
	"strings"
	"syscall"
)

// defaultSecretFiles are always masked; secrets.files adds to them.
var defaultSecretFiles = []string{"**/.env", "**/.env.*"}

// MaskEnvFile rewrites a .env file's content so that every value that
// looks like a secret (or whose name is in forced) becomes mask(name,
// value) (the value's placeholder, or for a URL the URL with its password
// replaced); everything else, comments and layout included, is kept. A
// quoted value may span lines (a PEM key): it is masked whole. It returns
// the new content and the secrets it replaced.
func MaskEnvFile(content []byte, forced map[string]bool, mask func(name, value string) (string, SecretPiece)) ([]byte, []SecretPiece) {
	var out bytes.Buffer
	var found []SecretPiece
	lines := strings.SplitAfter(string(content), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		body := strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimLeft(body, " \t")
		indent := body[:len(body)-len(trimmed)]
		export := ""
		if rest, ok := strings.CutPrefix(trimmed, "export "); ok {
			export, trimmed = "export ", strings.TrimLeft(rest, " \t")
		}
		name, value, ok := strings.Cut(trimmed, "=")
		name = strings.TrimSpace(name)
		if !ok || strings.HasPrefix(trimmed, "#") || !validEnvName(name) {
			out.WriteString(line)
			continue
		}
		ev, last := envValue(value, line[len(body):], lines[i+1:])
		if ev.v == "" || !(forced[name] || LooksSecret(name, ev.v)) {
			out.WriteString(strings.Join(lines[i:i+1+last], ""))
			i += last
			continue
		}
		masked, piece := mask(name, ev.v)
		found = append(found, piece)
		out.WriteString(indent + export + name + "=" + ev.quote + masked + ev.quote + ev.comment + ev.eol)
		i += last
	}
	return out.Bytes(), found
}

// dotenvValue is a .env value split from its quotes and trailing comment.
type dotenvValue struct {
	v, quote, comment, eol string
}

// envValue splits the value after NAME= (its line ending eol) from its
// quotes and a trailing comment. A quote left open runs on through the
// following lines (more) to the one that closes it, or to the end of the
// file; last is how many of them the value took.
func envValue(value, eol string, more []string) (ev dotenvValue, last int) {
	v := strings.TrimSpace(value)
	ev.eol = eol
	if len(v) == 0 || (v[0] != '"' && v[0] != '\'') {
		if i := strings.Index(v, " #"); i >= 0 {
			v, ev.comment = v[:i], v[i:]
		}
		ev.v = v
		return ev, 0
	}
	q := v[:1]
	rest := v[1:]
	for {
		if end := strings.Index(rest, q); end >= 0 {
			ev.v, ev.quote, ev.comment = rest[:end], q, strings.TrimRight(rest[end+1:], "\r\n")
			return ev, last
		}
		if last == len(more) {
			ev.v, ev.quote = strings.TrimRight(rest, "\r\n"), "" // never closed: all of it
			return ev, last
		}
		rest += eol
		eol = more[last][len(strings.TrimRight(more[last], "\r\n")):]
		ev.eol = eol
		rest += strings.TrimRight(more[last], "\r\n")
		last++
	}
}

// maxEnvFile bounds the .env files jail rewrites; a larger one is shown
// inside as empty rather than risk passing a secret through.
const maxEnvFile = 1 << 20

// readEnvFile is the content of a .env file to mask, or nothing when it
// cannot be read safely: only a regular file of at most maxEnvFile bytes
// is read, opened without following a last symlink (the plan resolved it)
// and without blocking, so that a name leading to a FIFO, a terminal or a
// device shows an empty file instead of hanging or reading a stream.
func readEnvFile(path string) []byte {
	for _, pseudo := range []string{"/proc", "/dev", "/sys"} {
		if under(path, pseudo) {
			return nil // another process's environment, a device: never a .env
		}
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK|syscall.O_NOCTTY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxEnvFile {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxEnvFile+1))
	if err != nil || len(b) > maxEnvFile {
		return nil
	}
	return b
}

// envFileSecrets are the names of the secrets each .env file holds (the
// values that MaskEnvFile replaces), for `jail plan`: read while gathering
// facts, bounded like the copies, never keeping a value.
func envFileSecrets(pol *Policy, f *Facts) map[string][]string {
	forced := map[string]bool{}
	for n := range pol.Secrets.Env {
		forced[n] = true
	}
	out := map[string][]string{}
	for _, pat := range secretFiles(pol) {
		files := []string{pat}
		if HasMeta(pat) {
			files = f.Matches[pat]
		}
		for _, path := range files {
			in := f.info(path)
			if !in.Exists || in.Dir || in.Unreadable {
				continue
			}
			src := path
			if in.Resolved != "" {
				src = in.Resolved
			}
			_, found := MaskEnvFile(readEnvFile(src), forced, func(name, _ string) (string, SecretPiece) {
				return "", SecretPiece{Name: name}
			})
			var names []string
			for _, fv := range found {
				names = append(names, fv.Name)
			}
			if len(names) > 0 {
				sort.Strings(names)
				out[src] = union(nil, names)
			}
		}
	}
	return out
}
