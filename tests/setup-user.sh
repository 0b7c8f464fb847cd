#!/bin/sh
# Creates the unprivileged account the end-to-end tests run jail as. Root
# hides half of what goes wrong in a sandbox, so the tests run both.
set -eu
user=jailtest
if [ "$(id -u)" != 0 ]; then
	echo "not root: the tests run jail as $(id -un) only"
	exit 0
fi
id "$user" >/dev/null 2>&1 || useradd --create-home --shell /bin/sh "$user"
