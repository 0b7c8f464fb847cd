package jail

import (
	"path/filepath"
	"strings"
)

// CommandRule is one entry of command.deny or command.allow: a program and
// the leading arguments that select it ("git push" -> git, [push]).
type CommandRule struct {
	Program string
	Args    []string
	// Path is the program as the rule wrote it when that is a path
	// ("scripts/deploy.sh", relative to the project): the file the rule
	// is about, besides those of its name on PATH.
	Path string
}

func (r CommandRule) String() string {
	return strings.Join(append([]string{r.Program}, r.Args...), " ")
}

// ParseCommandRules splits rule strings into programs and arguments.
func ParseCommandRules(list []string) []CommandRule {
	var out []CommandRule
	for _, s := range list {
		f := strings.Fields(s)
		if len(f) == 0 {
			continue
		}
		r := CommandRule{Program: ProgName(f[0]), Args: f[1:]}
		if strings.Contains(f[0], "/") {
			r.Path = f[0]
		}
		out = append(out, r)
	}
	return out
}

// wrapperOptsWithValue lists, per wrapper program, the options that take
// the next argument as their value; the first other non-option argument is
// the wrapped command.
var wrapperOptsWithValue = map[string]map[string]bool{
	"env":     {"-u": true, "--unset": true, "-C": true, "--chdir": true, "-S": true, "--split-string": true},
	"command": {},
	"exec":    {"-a": true},
	"nice":    {"-n": true, "--adjustment": true},
	"nohup":   {},
	"timeout": {"-s": true, "--signal": true, "-k": true, "--kill-after": true},
	"xargs":   {"-a": true, "--arg-file": true, "-d": true, "--delimiter": true, "-E": true, "-I": true, "-L": true, "-n": true, "--max-args": true, "-P": true, "--max-procs": true, "-s": true, "--max-chars": true},
	"setsid":  {},
	"stdbuf":  {"-i": true, "-o": true, "-e": true},
	"ionice":  {"-c": true, "-n": true, "-p": true},
	"time":    {"-f": true, "--format": true, "-o": true, "--output": true},
	"chrt":    {},
	"taskset": {},
}

// gitOptsWithValue are git's global options that take the next argument.
var gitOptsWithValue = map[string]bool{"-C": true, "-c": true, "--git-dir": true, "--work-tree": true, "--namespace": true, "--exec-path": true, "--config-env": true, "--super-prefix": true, "--list-cmds": true}

// npmOptsWithValue are npm options that take the next argument.
var npmOptsWithValue = map[string]bool{"--prefix": true, "-C": true, "--workspace": true, "-w": true, "--loglevel": true, "--registry": true, "--userconfig": true, "--cache": true, "--tag": true, "--otp": true, "--access": true}

// NormalizeArgv reduces an exec's argv to what command rules are written
// against: the program's base name and its positional arguments, with
// wrappers (env, command, exec, nice, nohup, timeout, xargs, …), VAR=value
// assignments, and git's and npm's global options taken away. So
// `env -u X nice -n 5 /usr/bin/git -C . -c a.b=c push` is [git push].
func NormalizeArgv(argv []string) []string {
	for depth := 0; len(argv) > 0 && depth < 16; depth++ {
		// VAR=value words before the command (as env and shells pass them).
		for len(argv) > 0 && isAssignment(argv[0]) {
			argv = argv[1:]
		}
		if len(argv) == 0 {
			return nil
		}
		prog := ProgName(argv[0])
		opts, isWrapper := wrapperOptsWithValue[prog]
		if !isWrapper {
			break
		}
		rest := argv[1:]
		if prog == "timeout" { // timeout [opts] DURATION CMD
			rest = skipOptions(rest, opts)
			if len(rest) > 0 {
				rest = rest[1:]
			}
		} else {
			rest = skipOptions(rest, opts)
		}
		if prog == "env" {
			for len(rest) > 0 && isAssignment(rest[0]) {
				rest = rest[1:]
			}
		}
		if len(rest) == 0 {
			return []string{prog} // the wrapper alone
		}
		argv = rest
	}
	if len(argv) == 0 {
		return nil
	}
	prog := ProgName(argv[0])
	args := argv[1:]
	// git runs its builtins by the name it was called as: git-push is
	// git push (git --exec-path holds them, and exec -a can fake one).
	if sub, ok := strings.CutPrefix(prog, "git-"); ok && sub != "" {
		prog, args = "git", append([]string{sub}, args...)
	}
	out := []string{prog}
	switch prog {
	case "git":
		args = skipOptions(args, gitOptsWithValue)
		// send-pack is the plumbing a push runs.
		if len(args) > 0 && args[0] == "send-pack" {
			args = append([]string{"push"}, args[1:]...)
		}
	case "npm", "pnpm", "yarn":
		// npm accepts options anywhere; rules match the positional words.
		var pos []string
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--":
				pos = append(pos, args[i+1:]...)
				i = len(args)
			case strings.HasPrefix(a, "-"):
				if npmOptsWithValue[a] && i+1 < len(args) {
					i++
				}
			default:
				pos = append(pos, a)
			}
		}
		args = pos
	}
	return append(out, args...)
}

// skipOptions drops leading options (and the values of those in
// withValue); "--" ends them.
func skipOptions(args []string, withValue map[string]bool) []string {
	for len(args) > 0 {
		a := args[0]
		switch {
		case a == "--":
			return args[1:]
		case !strings.HasPrefix(a, "-") || a == "-":
			return args
		case withValue[a]:
			if len(args) < 2 {
				return nil
			}
			args = args[2:]
		default:
			// --opt=value, combined short flags and plain flags
			args = args[1:]
		}
	}
	return args
}

// ProgName is the base name a rule is written against ("/usr/bin/git" ->
// "git"); a path that ends in a slash names no program.
func ProgName(p string) string {
	if b := filepath.Base(p); b != "/" && b != "." {
		return b
	}
	return ""
}

func isAssignment(s string) bool {
	name, _, ok := strings.Cut(s, "=")
	return ok && validEnvName(name)
}

// MatchCommand decides a normalized argv against the rules: the most
// specific matching rule wins, and allow wins over deny when they are
// equally specific. It returns whether the command is denied and by which
// rule.
func MatchCommand(norm []string, deny, allow []CommandRule) (bool, CommandRule) {
	best, bestDeny, found := CommandRule{}, false, false
	consider := func(rules []CommandRule, isDeny bool) {
		for _, r := range rules {
			if !ruleMatches(r, norm) {
				continue
			}
			if !found || len(r.Args) > len(best.Args) || (len(r.Args) == len(best.Args) && !isDeny) {
				best, bestDeny, found = r, isDeny, true
			}
		}
	}
	consider(deny, true)
	consider(allow, false)
	return found && bestDeny, best
}

func ruleMatches(r CommandRule, norm []string) bool {
	if len(norm) == 0 || norm[0] != r.Program || len(norm)-1 < len(r.Args) {
		return false
	}
	for i, a := range r.Args {
		if norm[i+1] != a {
			return false
		}
	}
	return true
}

// MatchAsk decides a normalized argv against command.ask as MatchCommand
// does against command.deny: the most specific matching rule wins, and an
// equally specific command.allow rule is the exception that runs without
// asking. It returns whether the command is asked and by which rule. A
// command that command.deny refuses is refused, not asked: callers match
// deny first (see CommandVerdict).
func MatchAsk(norm []string, ask, allow []CommandRule) (bool, CommandRule) {
	return MatchCommand(norm, ask, allow)
}

// CommandVerdict is the decision on a normalized argv: "deny" when
// command.deny refuses it, else "ask" when command.ask holds it, else ""
// (it runs); with the rule that decided.
func CommandVerdict(norm []string, deny, ask, allow []CommandRule) (string, CommandRule) {
	if denied, rule := MatchCommand(norm, deny, allow); denied {
		return "deny", rule
	}
	if asked, rule := MatchAsk(norm, ask, allow); asked {
		return "ask", rule
	}
	return "", CommandRule{}
}

// WireCommands are the command rules the proxy also enforces on the wire:
// "git push" and "npm publish", each when the exec rules refuse its plain
// form (an allow rule that wins there lifts the wire check too), and,
// with asked set, when they would ask about it (for a platform with no
// exec supervisor to hold the exec for a person).
func WireCommands(c CommandConfig, asked bool) []string {
	deny, ask, allow := ParseCommandRules(c.Deny), ParseCommandRules(c.Ask), ParseCommandRules(c.Allow)
	if !asked {
		ask = nil
	}
	var out []string
	for _, probe := range [][]string{{"git", "push"}, {"npm", "publish"}} {
		if verdict, _ := CommandVerdict(probe, deny, ask, allow); verdict != "" {
			out = append(out, strings.Join(probe, " "))
		}
	}
	return out
}
