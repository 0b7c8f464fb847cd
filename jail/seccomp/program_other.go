//go:build !amd64

package seccomp

var embedded []byte

var embeddedRules string
