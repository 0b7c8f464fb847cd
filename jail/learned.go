package jail

import (
	"path/filepath"
	"strings"
)

// Tracers an Observer can use.
const (
	TracerEBPF    = "ebpf"
	TracerSeccomp = "seccomp"
)

// LearnedName is the name a learning run files its profile under: the
// base name of the program, "" when it gives none to use.
func LearnedName(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	name := filepath.Base(argv[0])
	if name == "." || name == "/" || name == ".." || strings.ContainsAny(name, "\x00") {
		return ""
	}
	return name
}

// LearnedPath is where jail --learning writes the profile of argv's
// program, and where later runs of it find that profile:
// ~/.config/jail/learned/NAME.json.
func LearnedPath(home string, getenv func(string) string, argv []string) string {
	name := LearnedName(argv)
	if name == "" {
		return ""
	}
	return filepath.Join(UserConfigDir(home, getenv), "learned", name+".json")
}
