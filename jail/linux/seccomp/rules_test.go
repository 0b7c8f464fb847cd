package seccomp

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

func TestDefaultRulesGolden(t *testing.T) {
	golden := filepath.Join("testdata", "default_rules.golden")
	got := Format(DefaultRules())
	if *update {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", golden)
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run `go test ./jail/seccomp/ -run Golden -update` to create it)", err)
	}
	if got != string(want) {
		t.Errorf("DefaultRules() differs from %s (-want +got), rerun with -update if intended:\n%s",
			golden, lineDiff(string(want), got))
	}
}

func TestDefaultRulesDeterministicAndValid(t *testing.T) {
	a, b := Format(DefaultRules()), Format(DefaultRules())
	if a != b {
		t.Fatal("DefaultRules is not deterministic")
	}
	seen := map[string]bool{}
	for _, r := range DefaultRules() {
		if err := r.validate(); err != nil {
			t.Error(err)
		}
		if r.Why == "" {
			t.Errorf("rule %q has no Why", r)
		}
		if strings.Contains(r.String(), "\n") {
			t.Errorf("rule %q renders on several lines", r)
		}
		if seen[r.String()] {
			t.Errorf("duplicate rule %q", r)
		}
		seen[r.String()] = true
	}
}

func TestRuleString(t *testing.T) {
	for _, tc := range []struct {
		r    Rule
		want string
	}{
		{Rule{Syscall: "ptrace", Errno: EPERM, Why: "why"}, "ptrace -> EPERM  # why"},
		{Rule{Syscall: "ioctl", Errno: EPERM, Why: "TIOCSTI: inject input into the terminal",
			Conds: []Cond{{Arg: 1, Op: OpMaskedEq, Mask: 0xffffffff, Value: 0x5412}}},
			"ioctl(a1 &0xffffffff == 0x5412) -> EPERM  # TIOCSTI: inject input into the terminal"},
		{Rule{Syscall: "socket", Errno: EPERM,
			Conds: []Cond{{Arg: 0, Op: OpEq, Value: 16}, {Arg: 2, Op: OpNe, Value: 0}}},
			"socket(a0 == 0x10 && a2 != 0x0) -> EPERM"},
	} {
		if got := tc.r.String(); got != tc.want {
			t.Errorf("got  %q\nwant %q", got, tc.want)
		}
	}
}

// lineDiff is a small LCS line diff, enough for golden files.
func lineDiff(a, b string) string {
	x, y := strings.Split(a, "\n"), strings.Split(b, "\n")
	lcs := make([][]int, len(x)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(y)+1)
	}
	for i := len(x) - 1; i >= 0; i-- {
		for j := len(y) - 1; j >= 0; j-- {
			if x[i] == y[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(x) || j < len(y) {
		switch {
		case i < len(x) && j < len(y) && x[i] == y[j]:
			out.WriteString("  " + x[i] + "\n")
			i++
			j++
		case i < len(x) && (j == len(y) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + x[i] + "\n")
			i++
		default:
			out.WriteString("+ " + y[j] + "\n")
			j++
		}
	}
	return out.String()
}
