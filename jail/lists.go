package jail

import "path/filepath"

// The lists below are built from the planner's own tables, so that what
// `jail check --verbose` prints is what every jail masks or protects.

// CredentialStores returns the credential stores in home that every jail
// masks, even when a policy makes a parent directory visible; globs are
// expanded when the jail starts.
func CredentialStores(home string) []string { return joinEach(home, homeDeny) }

// ProtectedProjectPaths returns the paths in the project at root that stay
// read-only inside the writable project, because a later, unjailed program
// would run what they hold: those held even when missing, then those held
// when present.
func ProtectedProjectPaths(root string) []string {
	return joinEach(root, append(append([]string{".git"}, projectProtected...), projectProtectedPresent...))
}

// ProtectedHomePaths returns the paths in home that stay read-only
// whenever a policy makes them writable: startup files, caches, and the
// agents' files that declare commands.
func ProtectedHomePaths(home string) []string {
	return joinEach(home, append(append([]string{}, homeProtected...), agentCommandPaths...))
}

// SystemSecrets returns the host files every jail masks although the
// system directories holding them are visible.
func SystemSecrets() []string { return append([]string(nil), systemDeny...) }

// joinEach joins each relative path of list to dir (a directory's
// trailing "/" is dropped).
func joinEach(dir string, list []string) []string {
	out := make([]string, 0, len(list))
	for _, rel := range list {
		out = append(out, filepath.Join(dir, rel))
	}
	return out
}
