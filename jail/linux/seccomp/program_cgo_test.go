//go:build linux && cgo

package seccomp

import (
	"encoding/binary"
	"os"
	"runtime"
	"testing"

	"github.com/jailsh/jail/internal/sysnum"
)

// TestEmbeddedProgram regenerates the embedded programs of every
// architecture with -update (on any one machine: libseccomp exports a
// filter for a foreign architecture as well), and otherwise checks that
// each is what libseccomp makes of DefaultRules here. The bytes may
// differ under another libseccomp version; what the programs do is
// checked by the VM tests, which run them as well.
func TestEmbeddedProgram(t *testing.T) {
	if *update && binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		// Marshal writes this machine's byte order; amd64 and arm64
		// are little-endian.
		t.Fatal("generate the programs on a little-endian machine")
	}
	for _, goarch := range sysnum.Architectures {
		prog, err := compileFor(goarch, DefaultRules())
		if err != nil {
			t.Fatal(err)
		}
		bpfFile, rulesFile := "default_"+goarch+".bpf", "default_"+goarch+".rules"
		if *update {
			if err := os.WriteFile(bpfFile, Marshal(prog), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(rulesFile, []byte(Format(DefaultRules())), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		file, err := os.ReadFile(bpfFile)
		if err != nil {
			t.Fatal(err)
		}
		if string(Marshal(prog)) != string(file) {
			t.Logf("%s: libseccomp here generates a different program than the embedded one (%d vs %d instructions); the VM tests decide whether it is equivalent", goarch, len(prog), len(file)/instructionSize)
		}
	}
	if *update {
		return
	}
	// What the jail loads here is the embedded program, not one compiled
	// at start-up.
	got, err := Program(DefaultRules())
	if err != nil {
		t.Fatal(err)
	}
	if len(embedded) == 0 || string(got) != string(embedded) {
		t.Fatalf("Program(DefaultRules()) on %s did not return the embedded program", runtime.GOARCH)
	}
}
