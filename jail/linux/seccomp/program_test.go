package seccomp

import (
	"os"
	"runtime"
	"testing"

	"github.com/jailsh/jail/internal/sysnum"
)

// TestEmbeddedRulesCurrent: the embedded program of every architecture
// was generated from the rules as they are now. Regenerate with -update
// after changing them.
func TestEmbeddedRulesCurrent(t *testing.T) {
	for _, goarch := range sysnum.Architectures {
		rules, err := os.ReadFile("default_" + goarch + ".rules")
		if err != nil {
			t.Fatal(err)
		}
		if string(rules) != Format(DefaultRules()) {
			t.Errorf("default_%s.rules is stale: DefaultRules changed; run go test ./jail/seccomp -run TestEmbeddedProgram -update", goarch)
		}
		prog, err := os.ReadFile("default_" + goarch + ".bpf")
		if err != nil {
			t.Fatal(err)
		}
		if len(prog) == 0 || len(prog)%instructionSize != 0 {
			t.Errorf("default_%s.bpf: %d bytes is not a program", goarch, len(prog))
		}
		if goarch == runtime.GOARCH && (string(prog) != string(embedded) || string(rules) != embeddedRules) {
			t.Errorf("the binary does not embed default_%s.bpf and default_%s.rules", goarch, goarch)
		}
	}
}

// TestProgramWithoutCompiler: for the default rules the jail needs no
// libseccomp on amd64 and arm64; Program returns the embedded program
// (with cgo or without).
func TestProgramWithoutCompiler(t *testing.T) {
	if runtime.GOARCH != "amd64" && runtime.GOARCH != "arm64" {
		t.Skipf("no program is embedded for %s", runtime.GOARCH)
	}
	got, err := Program(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || string(got) != string(embedded) {
		t.Fatal("Program(DefaultRules()) is not the embedded program")
	}
}
