package jail

import (
	"strings"
	"testing"
)

// TestCheckPattern: what MatchPath cannot honour exactly is refused, with
// a reason; what it can is accepted.
func TestCheckPattern(t *testing.T) {
	for _, tc := range []struct {
		pat     string
		wantErr string // "" for a valid pattern
	}{
		{".env", ""},
		{".env.*", ""},
		{"secrets/**", ""},
		{"**/*.pem", ""},
		{"~/.ssh/**", ""},
		{"[abc]?.txt", ""},
		{"[^x]*", ""},
		{"a\\*b", ""},
		{"[\\]]x", ""},
		{"a]", ""},
		{"../shared/**", ""},        // ".." before the glob: an ordinary path
		{"../other", ""},            // a literal path
		{"a\\", ""},                 // literal: no glob characters, the backslash is a name character
		{"/etc/ssh/ssh_host_*", ""}, // a glob below a directory of /
		{"*.pem", ""},
		{"", "empty path"},
		{" ", "empty path"},
		{"a\x00b", "NUL byte"},
		{"[a-", "malformed bracket expression"},
		{"x[", "malformed bracket expression"},
		{"[]", "malformed bracket expression"},
		{"[^]", "malformed bracket expression"},
		{"[a-]", "malformed bracket expression"},
		{"[-a]", "malformed bracket expression"},
		{"[a/b]", "malformed bracket expression"},
		{"[\\", "malformed bracket expression"},
		{"a*\\", "ends in a backslash that escapes nothing"},
		{"[!.]*", `"[!" is a literal "!" here; negate a class with "[^...]"`},
		{"[z-a]", "the range z-a is empty"},
		{"foo**", `"foo**": "**" must be a whole path segment`},
		{"a/**b/c", `"**" must be a whole path segment`},
		{"***", `"**" must be a whole path segment`},
		{"secrets/*/../../.ssh", `".." after a glob segment`},
		{"**/..", `".." after a glob segment`},
		{"/*/secret", "would walk the whole machine"},
		{"/**/*.pem", "would walk the whole machine"},
	} {
		err := CheckPattern(tc.pat)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("CheckPattern(%q) = %v, want nil", tc.pat, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("CheckPattern(%q) = %v, want an error containing %q", tc.pat, err, tc.wantErr)
		case err != nil && strings.ContainsAny(err.Error(), "\n\r"):
			t.Errorf("CheckPattern(%q) = %q: not one line", tc.pat, err)
		}
	}
}

// TestParseConfigPatternErrors: a path pattern jail cannot honour is a
// config error at the entry's line and column, in every path list.
func TestParseConfigPatternErrors(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"filesystem": {"denyRead": [".env", "secrets/[a-"]}}`,
			`jail.json:1:38: "denyRead" entry "secrets/[a-": "[a-": malformed bracket expression; close it with "]", or put a backslash before a literal "["`},
		{"{\n  \"filesystem\": {\n    \"denyWrite\": [\"foo**\"]\n  }\n}",
			`jail.json:3:19: "denyWrite" entry "foo**": "foo**": "**" must be a whole path segment, as in "a/**/b" or "a*/**"`},
		{`{"filesystem": {"allowRead": ["src/*/../../x"]}}`,
			`jail.json:1:31: "allowRead" entry "src/*/../../x": ".." after a glob segment; write the path without it`},
		{`{"filesystem": {"allowWrite": ["/*"]}}`,
			`jail.json:1:32: "allowWrite" entry "/*": a glob right below "/" would walk the whole machine; start the pattern with a directory`},
		{`{"secrets": {"files": ["[!.]env"]}}`,
			`jail.json:1:24: "files" entry "[!.]env": "[!.]env": "[!" is a literal "!" here; negate a class with "[^...]"`},
	} {
		_, err := ParseConfig([]byte(tc.doc), "jail.json")
		if err == nil || err.Error() != tc.want {
			t.Errorf("ParseConfig(%q):\n got %v\nwant %s", tc.doc, err, tc.want)
		}
	}
}
