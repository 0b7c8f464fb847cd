#!/bin/sh
# Installs what jail needs to build, run and be tested, through the system
# package manager, only when something is missing. Debian and Ubuntu.
set -eu

need=""
command -v bwrap >/dev/null 2>&1 || need="$need bubblewrap"
[ -e /usr/include/seccomp.h ] || need="$need libseccomp-dev"
command -v gcc >/dev/null 2>&1 || need="$need gcc libc6-dev"
command -v pkg-config >/dev/null 2>&1 || need="$need pkg-config"
command -v git >/dev/null 2>&1 || need="$need git"
command -v make >/dev/null 2>&1 || need="$need make"
if [ "${1:-}" = "--test" ]; then
	[ -x /usr/bin/python3 ] || need="$need python3"
	[ -e /usr/include/asm-generic/unistd.h ] || need="$need linux-libc-dev" # the syscall tables are checked against it
	command -v node >/dev/null 2>&1 || need="$need nodejs"
	command -v npm >/dev/null 2>&1 || need="$need npm" # not part of every distribution's nodejs
	command -v tmux >/dev/null 2>&1 || need="$need tmux"
	command -v curl >/dev/null 2>&1 || need="$need curl"
	command -v socat >/dev/null 2>&1 || need="$need socat"
	[ -x /usr/sbin/sshd ] || need="$need openssh-server" # the SSH tests run a real sshd on loopback
	command -v rsync >/dev/null 2>&1 || need="$need rsync" # the remote sync sends by rsync when both ends have it
	command -v dig >/dev/null 2>&1 || need="$need bind9-dnsutils" # dig and nslookup, against the jail's resolver
	command -v setpriv >/dev/null 2>&1 || need="$need util-linux"
	command -v setcap >/dev/null 2>&1 || [ -x /usr/sbin/setcap ] || [ -x /sbin/setcap ] || need="$need libcap2-bin"
	command -v hyperfine >/dev/null 2>&1 || need="$need hyperfine"
	command -v strace >/dev/null 2>&1 || need="$need strace" # BenchmarkLearning's reference
	[ -x /usr/bin/chromium ] || need="$need chromium" # the dashboard tests drive it headless
fi
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || need="$need golang-go"

if [ -n "$need" ]; then
	sudo=""
	[ "$(id -u)" = 0 ] || sudo="sudo"
	echo "installing:$need"
	$sudo apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $need >/dev/null
fi
