package darwin

import (
	"regexp"
	"strings"
	"testing"
)

// evaluate decides a file operation on a path the way Seatbelt does for the
// rules this generator writes: the last rule whose operation and filter
// match wins, and the default is deny. Parameters are substituted from the
// profile's own list, so the test sees exactly what sandbox-exec would bind.
func evaluate(t *testing.T, prof Profile, op, path string) bool {
	t.Helper()
	forms, err := parseSexp(prof.Text)
	if err != nil {
		t.Fatal(err)
	}
	params := map[string]string{}
	for _, p := range prof.Params {
		params[p.Name] = p.Value
	}
	allowed := false
	for _, f := range forms[2:] {
		if !ruleOp(f, op) || !ruleMatches(t, f, params, path) {
			continue
		}
		allowed = f.head() == "allow"
	}
	return allowed
}

func ruleOp(f node, op string) bool {
	for _, n := range f.list[1:] {
		if n.isList || n.atom == "" {
			continue
		}
		if n.atom == op || (strings.HasSuffix(n.atom, "*") && strings.HasPrefix(op, strings.TrimSuffix(n.atom, "*"))) {
			return true
		}
	}
	return false
}

func ruleMatches(t *testing.T, f node, params map[string]string, path string) bool {
	filters := 0
	for _, n := range f.list[1:] {
		if !n.isList {
			continue
		}
		filters++
		if len(n.list) != 2 || n.list[1].head() != "param" {
			continue
		}
		v := params[*n.list[1].list[1].str]
		switch n.head() {
		case "literal":
			if path == v {
				return true
			}
		case "subpath":
			if path == v || strings.HasPrefix(path, strings.TrimSuffix(v, "/")+"/") {
				return true
			}
		case "regex":
			if regexp.MustCompile(v).MatchString(path) {
				return true
			}
		}
	}
	return filters == 0
}

// TestWhatTheProfileAllows evaluates the generated rules for the paths an
// attacker inside the jail would go for, and for the paths work needs.
func TestWhatTheProfileAllows(t *testing.T) {
	pol := globPolicy()
	prof, err := Generate(pol)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		op, path string
		want     bool
	}{
		{"file-read-data", project + "/main.go", true},
		{"file-write-data", project + "/main.go", true},
		{"file-write-create", project + "/new/file", true},
		{"file-read-data", "/usr/bin/git", true},
		{"file-read-data", "/private/etc/ssl/cert.pem", true},
		{"file-write-data", "/private/var/folders/ab/T/jail-1/x", true},
		{"file-read-metadata", home, true},
		// Masks: unreadable and unwritable wherever the glob reaches. The
		// project path holds ( ) . + [ ], so these hold only if the glob's
		// literal directory was escaped.
		{"file-read-data", project + "/.env", false},
		{"file-read-data", project + "/a/b/.env.production", false},
		{"file-write-create", project + "/a/.env", false},
		{"file-read-data", project + "/secrets/key", false},
		{"file-read-data", home + "/.aws/credentials", false},
		{"file-read-data", "/opt/homebrew/.netrc", false},
		// Protected: readable, not writable, not creatable, not renamable.
		{"file-read-data", project + "/.git/config", true},
		{"file-write-data", project + "/.git/config", false},
		{"file-write-create", project + "/.git/hooks/pre-commit", false},
		{"file-write-unlink", project + "/.git", false},
		{"file-write-create", project + "/.git/modules/m/config", false},
		{"file-write-data", project + "/sub/dir/jail.json", false},
		{"file-write-create", project + "/.claude/settings.local.json", false},
		{"file-write-create", project + "/.claude/notes.md", true},
		{"file-write-unlink", project + "/.claude", false},
		{"file-write-unlink", project, false},
		{"file-write-create", home + "/.ssh/authorized_keys", false},
		// The rest of the machine.
		{"file-read-data", home + "/Documents/taxes.pdf", false},
		{"file-read-data", home + "/.ssh/id_ed25519", false},
		{"file-read-data", "/Users/other/.zshrc", false},
		{"file-read-data", "/Library/Keychains/System.keychain", false},
		{"file-write-data", "/usr/local/bin/git", false},
		{"file-write-data", home + "/.zshrc", false},
		{"file-read-data", "/dev/disk0", false},
	} {
		if got := evaluate(t, prof, tc.op, tc.path); got != tc.want {
			t.Errorf("%s %s: allowed=%v, want %v", tc.op, tc.path, got, tc.want)
		}
	}
}
