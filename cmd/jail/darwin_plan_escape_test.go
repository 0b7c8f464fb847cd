package main

import (
	"strings"
	"testing"

	"github.com/jailsh/jail/darwin"
)

// TestDarwinPlanLineIsQuotedAndEscaped prints a macOS plan whose command
// and parameters hold terminal escapes, a newline, quotes and shell
// syntax: the printed text carries no raw control byte, a newline in an
// argument prints no line of its own (such as a forged "# note:"), and
// every hostile argument is single-quoted.
func TestDarwinPlanLineIsQuotedAndEscaped(t *testing.T) {
	p := &darwin.Plan{
		Argv: []string{"sh", "-c", "echo \x1b]0;owned\x07 $(id)\n# note: nothing is masked"},
		Profile: darwin.Profile{Text: "(version 1)\n(deny default)\n", Params: []darwin.Param{
			{Name: "PROJECT_0", Value: "/Users/a/x'; touch /tmp/p; '\x1b[2J"},
		}},
	}
	out := escapedLines(darwinPlanText(p, nil))
	for i := 0; i < len(out); i++ {
		if c := out[i]; (c < 0x20 && c != '\n') || c == 0x7f {
			t.Fatalf("the printed plan holds the control byte %#x: %q", c, out)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "# note: nothing") {
			t.Errorf("a newline in the command printed a line of its own: %q", out)
		}
	}
	if !strings.Contains(out, `-D 'PROJECT_0=/Users/a/x'\''; touch /tmp/p; '\''\x1b[2J'`) {
		t.Errorf("the parameter is not single-quoted whole:\n%s", out)
	}
	if !strings.Contains(out, `-- sh -c 'echo \x1b]0;owned\x07 $(id)\x0a# note: nothing is masked'`) {
		t.Errorf("the command is not single-quoted whole on one line:\n%s", out)
	}
}
