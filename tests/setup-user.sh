#!/bin/sh
# Creates the unprivileged account the end-to-end tests run jail as. Root
# hides half of what goes wrong in a sandbox, so the tests run both. It
# also creates the account jail --remote logs in as on the tests' own
# sshd: a user of its own, with its own home, as on a rented host.
set -eu
user=jailtest
remote=jailremote
if [ "$(id -u)" != 0 ]; then
	echo "not root: the tests run jail as $(id -un) only"
	exit 0
fi
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
id "$remote" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$remote"
# No password, and not locked: an sshd without PAM refuses a locked
# account even a key of.
usermod -p '*' "$remote"
