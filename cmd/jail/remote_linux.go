package main

import "syscall"

// sshAttr makes the session's ssh end with jail: a jail killed outright
// must not leave its ssh, and so the remote command, running.
func sshAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
