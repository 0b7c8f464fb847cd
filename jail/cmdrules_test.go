package jail

import (
	"strings"
	"testing"
)

func TestNormalizeArgv(t *testing.T) {
	tests := []struct{ argv, want string }{
		{"git push", "git push"},
		{"/usr/bin/git push origin main", "git push origin main"},
		{"env git push", "git push"},
		{"env -i -u HOME A=1 B=2 git push", "git push"},
		{"command git push", "git push"},
		{"exec -a name git push", "git push"},
		{"nice -n 5 git push", "git push"},
		{"nohup git push", "git push"},
		{"timeout -s KILL 10 git push", "git push"},
		{"timeout 5s git push", "git push"},
		{"xargs -n 1 git push", "git push"},
		{"VAR=1 git push", "git push"},
		{"env nice nohup /usr/bin/git push", "git push"},
		{"git -C . push", "git push"},
		{"git -c a.b=c push", "git push"},
		{"git --git-dir=.git --work-tree . --no-pager push", "git push"},
		{"git -C /p -c x=y -P status", "git status"},
		{"git status", "git status"},
		{"git-push origin main", "git push origin main"},
		{"/usr/lib/git-core/git-push", "git push"},
		{"git send-pack ../r main", "git push ../r main"},
		{"npm publish", "npm publish"},
		{"npm --prefix ./pkg publish --dry-run", "npm publish"},
		{"npm -w a publish", "npm publish"},
		{"npx something", "npx something"},
		{"env", "env"},
		{"A=1", ""},
		{"sh -c 'git push'", "sh -c 'git push'"},
	}
	for _, tt := range tests {
		got := strings.Join(NormalizeArgv(strings.Fields(tt.argv)), " ")
		if tt.argv == "sh -c 'git push'" {
			got = strings.Join(NormalizeArgv([]string{"sh", "-c", "'git push'"}), " ")
		}
		if got != tt.want {
			t.Errorf("NormalizeArgv(%q) = %q, want %q", tt.argv, got, tt.want)
		}
	}
}

func TestMatchCommand(t *testing.T) {
	deny := ParseCommandRules([]string{"git push", "npm publish", "rm"})
	allow := ParseCommandRules([]string{"git push --dry-run", "rm -i"})
	tests := []struct {
		argv   string
		denied bool
		rule   string
	}{
		{"git push", true, "git push"},
		{"/usr/bin/git -C . push origin", true, "git push"},
		{"env VAR=1 git push", true, "git push"},
		{"git status", false, ""},
		{"git commit -m x", false, ""},
		{"git fetch", false, ""},
		{"git pushx", false, ""},
		{"git push --dry-run", false, "git push --dry-run"},
		{"npm publish", true, "npm publish"},
		{"npm --prefix . publish", true, "npm publish"},
		{"npm install", false, ""},
		{"rm -rf /", true, "rm"},
		{"rm -i x", false, "rm -i"},
	}
	for _, tt := range tests {
		denied, rule := MatchCommand(NormalizeArgv(strings.Fields(tt.argv)), deny, allow)
		if denied != tt.denied || (tt.rule != "" && rule.String() != tt.rule) {
			t.Errorf("%q: denied=%v by %q, want denied=%v by %q", tt.argv, denied, rule, tt.denied, tt.rule)
		}
	}
}

func FuzzNormalizeArgv(f *testing.F) {
	f.Add("env -u X nice -n 5 /usr/bin/git -C . -c a=b push")
	f.Add("timeout -s")
	f.Fuzz(func(t *testing.T, s string) {
		norm := NormalizeArgv(strings.Fields(s))
		if len(norm) > 0 && strings.Contains(norm[0], "/") {
			t.Fatalf("program %q is not a base name", norm[0])
		}
	})
}

// TestCommandVerdict: command.ask holds a command wherever command.deny
// would refuse it (wrappers, git's global options, git-push, send-pack,
// VAR=value), an allow exception runs it without asking, and deny wins
// over ask whatever their specificity.
func TestCommandVerdict(t *testing.T) {
	deny := ParseCommandRules([]string{"git push --force", "rm"})
	ask := ParseCommandRules([]string{"git push", "npm publish", "rm -i", "curl"})
	allow := ParseCommandRules([]string{"git push --dry-run", "curl --version"})
	tests := []struct{ argv, verdict, rule string }{
		{"git push", "ask", "git push"},
		{"git push origin main", "ask", "git push"},
		{"/usr/bin/git -C . -c a.b=c push", "ask", "git push"},
		{"env -u HOME VAR=1 nice -n 5 git push", "ask", "git push"},
		{"timeout 5 git push", "ask", "git push"},
		{"xargs -n 1 git push", "ask", "git push"},
		{"exec -a x git push", "ask", "git push"},
		{"/usr/lib/git-core/git-push origin", "ask", "git push"},
		{"git send-pack ../r main", "ask", "git push"},
		{"git --git-dir=.git --no-pager push", "ask", "git push"},
		{"npm --prefix . publish", "ask", "npm publish"},
		{"git push --force", "deny", "git push --force"},
		{"env git push --force origin", "deny", "git push --force"},
		{"rm -i x", "deny", "rm"}, // deny > ask, even the less specific deny
		{"git push --dry-run", "", ""},
		{"curl --version", "", ""},
		{"curl http://127.0.0.1/", "ask", "curl"},
		{"git status", "", ""},
		{"git pushx", "", ""},
		{"true", "", ""},
	}
	for _, tt := range tests {
		verdict, rule := CommandVerdict(NormalizeArgv(strings.Fields(tt.argv)), deny, ask, allow)
		if verdict != tt.verdict || (tt.rule != "" && rule.String() != tt.rule) {
			t.Errorf("%q: %q by %q, want %q by %q", tt.argv, verdict, rule, tt.verdict, tt.rule)
		}
	}
	if asked, _ := MatchAsk(nil, ask, allow); asked {
		t.Error("an empty argv is asked")
	}
}
