//go:build !linux

package main

// isTerminal is false off Linux, where jail does not run commands.
func isTerminal(fd int) bool { return false }
