package main

import (
	"io"

	"github.com/jailsh/jail/jail"
)

// schemaCmd is `jail schema`: it prints the JSON Schema for jail.json.
func schemaCmd(stdout io.Writer) int {
	if _, err := stdout.Write(jail.Schema); err != nil {
		return 125
	}
	return 0
}
