package main

import (
	"strings"

	"github.com/jailsh/jail/jail"
)

// escapedLines is text with each line escaped as jail.Escaped does and
// the line breaks kept: multi-line output, such as the plan, that names
// paths and hosts a project chose.
func escapedLines(text string) string {
	lines := strings.SplitAfter(text, "\n")
	for i, l := range lines {
		body := strings.TrimSuffix(l, "\n")
		lines[i] = jail.Escaped(body) + l[len(body):]
	}
	return strings.Join(lines, "")
}
