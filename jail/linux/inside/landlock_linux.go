package inside

import (
	"fmt"

	ll "github.com/landlock-lsm/go-landlock/landlock"
	llsys "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// landlockRights maps the plan's access classes to Landlock rights for an
// ABI version. Rights a file cannot carry are dropped for file rules.
func landlockRights(abi int) (handled ll.AccessFSSet, classes map[string]ll.AccessFSSet) {
	handled = ll.AccessFSSet(1<<13 - 1) // ABI 1: execute .. make_sym
	if abi >= 2 {
		handled |= llsys.AccessFSRefer
	}
	if abi >= 3 {
		handled |= llsys.AccessFSTruncate
	}
	if abi >= 5 {
		handled |= llsys.AccessFSIoctlDev
	}
	read := ll.AccessFSSet(llsys.AccessFSExecute | llsys.AccessFSReadFile | llsys.AccessFSReadDir)
	rw := ll.AccessFSSet(llsys.AccessFSReadFile | llsys.AccessFSReadDir | llsys.AccessFSWriteFile)
	classes = map[string]ll.AccessFSSet{
		"list":  ll.AccessFSSet(llsys.AccessFSReadDir),
		"read":  read,
		"write": handled &^ llsys.AccessFSIoctlDev,
		// /proc is read-only: no /proc/PID/mem, environ, oom_score_adj,
		// uid_map or comm is opened for writing. A /proc/self/fd/N (and
		// /dev/stdout, /dev/fd/N) is a magic link, checked as the file it
		// leads to: a pipe or a terminal is written to as before.
		"proc": ll.AccessFSSet(llsys.AccessFSReadFile | llsys.AccessFSReadDir),
		"dev":  rw | (handled & llsys.AccessFSTruncate),
		"tty":  rw | (handled & (llsys.AccessFSTruncate | llsys.AccessFSIoctlDev)),
	}
	return handled, classes
}

// fileRights are the rights that apply to a file rather than a directory.
const fileRights = ll.AccessFSSet(llsys.AccessFSExecute | llsys.AccessFSWriteFile | llsys.AccessFSReadFile | llsys.AccessFSTruncate | llsys.AccessFSIoctlDev)

// applyLandlock restricts this process and its future children to the
// plan's rules. Requires Landlock ABI 1; device ioctls are limited from
// ABI 5 and abstract unix sockets and signals are scoped from ABI 6.
func applyLandlock(abi int, rules []LandlockRule) error {
	handled, classes := landlockRights(abi)
	args := []any{handled}
	if abi >= 6 {
		args = append(args, ll.ScopedSet(llsys.ScopeAbstractUnixSocket|llsys.ScopeSignal))
	}
	cfg, err := ll.NewConfig(args...)
	if err != nil {
		return fmt.Errorf("landlock config for ABI %d: %w", abi, err)
	}
	var lr []ll.Rule
	for _, r := range rules {
		access, ok := classes[r.Access]
		if !ok {
			return fmt.Errorf("landlock rule for %q: unknown access class %q", r.Path, r.Access)
		}
		if r.File {
			access &= fileRights
		}
		lr = append(lr, ll.PathAccess(access, r.Path).IgnoreIfMissing())
	}
	if err := cfg.Restrict(lr...); err != nil {
		return fmt.Errorf("applying landlock (ABI %d): %w", abi, err)
	}
	return nil
}
