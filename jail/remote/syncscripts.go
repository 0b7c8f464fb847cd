package remote

// The scripts the sync runs on the remote. Each takes its data as
// positional parameters (withArgs), never spliced into its text. $1 is
// the workspace as configured: "~/" at its start means the remote home.

// scriptWorkspace turns $1 into the workspace's path in $d.
const scriptWorkspace = `d=$1
case $d in "~") d=$HOME ;; "~/"*) d=$HOME/${d#"~/"} ;; esac
`

// scriptList prints the workspace's real path, the home's, whether
// rsync is there (or "home PATH" and nothing more for a workspace that
// is the root, the home or above it),
// and then every directory, file and symlink below it as
// "TYPE MODE SIZE MTIME PATH\0LINK\0". With $2 = create the workspace is
// made first (private), else a missing one prints "missing".
const scriptList = scriptWorkspace + `umask 077
if [ "$2" = create ]; then mkdir -p -- "$d" || exit 1; fi
if [ ! -d "$d" ]; then echo missing; exit 0; fi
cd -- "$d" || exit 1
w=$(pwd -P) h=$(cd -- "$HOME" && pwd -P) || h=/
case $w:$h in /:* | *:/ | "$w:$w" | "$w:$w"/*) echo "home $w"; exit 0 ;; esac
printf '%s\n%s\n' "$w" "$h"
if command -v rsync >/dev/null 2>&1; then echo rsync; else echo no-rsync; fi
echo LIST
exec find . -mindepth 1 \( -type f -o -type d -o -type l \) -printf '%y %m %s %T@ %P\0%l\0'
`

// scriptUntar unpacks the tar on stdin into the workspace, as the remote
// user, with the modes it carries.
const scriptUntar = scriptWorkspace + `cd -- "$d" || exit 1
exec tar -x --no-same-owner -p -f -
`

// scriptRemove removes the NUL-separated paths on stdin from the
// workspace.
const scriptRemove = scriptWorkspace + `cd -- "$d" || exit 1
exec xargs -0 -r rm -rf --
`

// scriptFetch writes a tar of the NUL-separated paths on stdin, each
// alone (a directory without what it holds).
const scriptFetch = scriptWorkspace + `cd -- "$d" || exit 1
exec tar -c -f - --no-recursion --null -T -
`

// scriptDrop removes the workspace, never the home or the root itself.
const scriptDrop = scriptWorkspace + `d=$(cd -- "$d" 2>/dev/null && pwd -P) || exit 0
h=$(cd -- "$HOME" && pwd -P)
case $d:$h in /:* | *:/ | "$d:$d" | "$d:$d"/*) echo "refusing to remove $d, the home or above it" >&2; exit 1 ;; esac
exec rm -rf -- "$d"
`
