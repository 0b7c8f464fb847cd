package jail

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Escaped is s as jail prints it on the user's terminal when a jailed run
// or a project chose it (a URL path, a SOCKS host name, an argv, a file
// name): every character a terminal would act on is written as an escape,
// so that s cannot move the cursor, clear the screen, set the window
// title, break the line or reorder the text around it. The C0 controls
// (tab and newline included) and DEL become \xNN (ESC is \x1b); the C1
// controls (U+009B is the one-byte CSI) and every other character
// strconv.IsPrint rejects, such as U+2028 or U+202E, become \uNNNN; a
// byte that is not UTF-8 becomes \xNN. Printable text, spaces and
// backslashes are left as they are.
func Escaped(s string) string {
	i := 0
	for i < len(s) && s[i] >= 0x20 && s[i] < 0x7f {
		i++
	}
	if i == len(s) {
		return s
	}
	var b strings.Builder
	b.WriteString(s[:i])
	for s = s[i:]; len(s) > 0; {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case strconv.IsPrint(r):
			b.WriteString(s[:n])
		case r > 0xffff:
			fmt.Fprintf(&b, `\U%08x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		s = s[n:]
	}
	return b.String()
}

// ShellQuote is s quoted for a POSIX shell, as jail prints a command line
// for review: bare when it holds only bytes no shell acts on, else in
// single quotes, each quote inside closed, escaped and reopened.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
