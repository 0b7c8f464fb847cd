package main

import (
	"strings"
	"testing"

	"github.com/jailsh/jail/darwin"
)

// TestDarwinPlanLineIsQuotedAndEscaped prints a macOS plan whose command
// and parameters hold terminal escapes, a newline, quotes and shell
// syntax: the printed text carries no raw control byte, the command stays
// one line (a newline in an argument would print a line of its own, such
// as a forged "# note:"), and every hostile argument is single-quoted.
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
	var cmdLine string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, darwin.SandboxExec+" ") {
			if cmdLine != "" {
				t.Fatalf("more than one command line: %q", out)
			}
			cmdLine = l
		}
	}
	if !strings.Contains(cmdLine, `'PROJECT_0=/Users/a/x'\''; touch /tmp/p; '\''`) {
		t.Errorf("the parameter is not single-quoted whole: %s", cmdLine)
	}
	if strings.Contains(out, "\n# note: nothing") {
		t.Errorf("a newline in the command printed a line of its own: %q", out)
	}
	if !strings.Contains(cmdLine, `'echo `) || !strings.Contains(cmdLine, `\x0a# note: nothing is masked'`) {
		t.Errorf("the command is not single-quoted whole: %s", cmdLine)
	}
}
