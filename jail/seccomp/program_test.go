package seccomp

import (
	"os"
	"runtime"
	"testing"
)

// TestEmbeddedRulesCurrent: the embedded program was generated from the
// rules as they are now. Regenerate with -update after changing them.
func TestEmbeddedRulesCurrent(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("no embedded program for %s: jail compiles the filter at start-up there", runtime.GOARCH)
	}
	if embeddedRules != Format(DefaultRules()) {
		t.Fatalf("default_amd64.rules is stale: DefaultRules changed; run go test ./jail/seccomp -run TestEmbeddedProgram -update")
	}
	if _, err := os.Stat("default_amd64.bpf"); err != nil {
		t.Fatal(err)
	}
}
