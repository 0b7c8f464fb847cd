//go:build !linux

package main

import "syscall"

// sshAttr is nil where no parent-death signal exists.
func sshAttr() *syscall.SysProcAttr { return nil }
