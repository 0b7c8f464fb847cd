//go:build !amd64 && !arm64

package seccomp

var embedded []byte

var embeddedRules string
