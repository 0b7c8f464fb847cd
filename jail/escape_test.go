package jail

import (
	"strconv"
	"testing"
	"unicode/utf8"
)

func TestEscaped(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", ""},
		{"api.allowed.test:443/v1 (ok)", "api.allowed.test:443/v1 (ok)"},
		{`C:\path ×2 héllo 日本 🙂`, `C:\path ×2 héllo 日本 🙂`},
		{"/\x1b[2J", `/\x1b[2J`},
		{"\x1b]0;title\x07", `\x1b]0;title\x07`},
		{"a\nb\tc\rd\x00", `a\x0ab\x09c\x0dd\x00`},
		{"del\x7f", `del\x7f`},
		{"csi\u009b31m nel\u0085", `csi\u009b31m nel\u0085`},
		{"\xc2\x9b", `\u009b`},
		{"bad\xff\xfe\xc3", `bad\xff\xfe\xc3`},
		{"ls\u2028rev\u202egnp.exe nbsp\u00a0", `ls\u2028rev\u202egnp.exe nbsp\u00a0`},
		{"tag\U000e0041", `tag\U000e0041`},
	} {
		got := Escaped(tt.in)
		if got != tt.want {
			t.Errorf("Escaped(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if !utf8.ValidString(got) {
			t.Errorf("Escaped(%q) is not UTF-8", tt.in)
		}
		for _, r := range got {
			if !strconv.IsPrint(r) {
				t.Errorf("Escaped(%q) holds %U raw", tt.in, r)
			}
		}
	}
}

// FuzzEscaped: whatever the input, the output is printable UTF-8.
func FuzzEscaped(f *testing.F) {
	f.Add("\x1b[2J\xc2\x9b\x7f\xff")
	f.Fuzz(func(t *testing.T, s string) {
		got := Escaped(s)
		for _, r := range got {
			if !strconv.IsPrint(r) || r == utf8.RuneError && !utf8.ValidString(got) {
				t.Fatalf("Escaped(%q) = %q holds %U", s, got, r)
			}
		}
	})
}
