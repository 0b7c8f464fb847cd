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
// base name of the program, "" when it gives none to use. A shell string
// (jail -c 'npm test', sh -c '...') is named after its first word when that
// is a plain program name, so that learning one shell string does not
// widen every other.
func LearnedName(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	name := filepath.Base(argv[0])
	if len(argv) >= 3 && argv[1] == "-c" && shells[name] {
		return shellStringName(argv[2])
	}
	if !plainName(name) {
		return ""
	}
	return name
}

var shells = map[string]bool{"sh": true, "bash": true, "dash": true, "zsh": true}

// shellStringName names a shell string after the program its first command
// runs, past VAR=value words and wrappers (env -u X, exec, nice…, as
// command rules see them). A shell builtin or anything else ("cd x && make",
// "$(...)") gives "sh".
func shellStringName(script string) string {
	norm := NormalizeArgv(strings.Fields(script))
	if len(norm) == 0 || builtins[norm[0]] || !plainName(norm[0]) {
		return "sh"
	}
	return norm[0]
}

var builtins = map[string]bool{
	"cd": true, "export": true, "set": true, "unset": true, "source": true, ".": true, "eval": true,
	"if": true, "for": true, "while": true, "until": true, "case": true, "test": true, "[": true,
	"true": true, "false": true, "echo": true, "printf": true, "read": true, "builtin": true,
	"alias": true, "umask": true, "ulimit": true, "trap": true, "exit": true, "return": true, ":": true,
}

// plainName: letters, digits and ._+- only, not starting with a dot.
func plainName(s string) bool {
	if s == "" || s[0] == '.' {
		return false
	}
	for _, c := range s {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-'
		if !ok {
			return false
		}
	}
	return true
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
