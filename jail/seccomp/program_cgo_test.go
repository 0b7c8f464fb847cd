//go:build linux && cgo

package seccomp

import (
	"os"
	"runtime"
	"testing"
)

// TestEmbeddedProgram regenerates the embedded program with -update, and
// otherwise checks it is what libseccomp makes of DefaultRules here. The
// bytes may differ under another libseccomp version; what the program does
// is checked by the VM tests, which run it as well.
func TestEmbeddedProgram(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skipf("no embedded program for %s", runtime.GOARCH)
	}
	prog, err := Compile(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile("default_amd64.bpf", Marshal(prog), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("default_amd64.rules", []byte(Format(DefaultRules())), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if string(Marshal(prog)) != string(embedded) {
		t.Logf("libseccomp here generates a different program than the embedded one (%d vs %d instructions); the VM tests decide whether it is equivalent", len(prog), len(embedded)/instructionSize)
	}
	got, err := Program(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(embedded) {
		t.Fatalf("Program(DefaultRules()) did not return the embedded program")
	}
}
