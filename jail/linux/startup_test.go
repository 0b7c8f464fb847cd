package linux

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestHardLinkScanSkipsPlaceholderPool: the hard-link scan of jail's state
// directory passes over the placeholder pool (spare empty placeholders, as
// many as were ever held at once), so a large pool neither slows every
// start nor trips the walk limit; a file of the state directory that does
// have another name in the project is still found and masked there.
func TestHardLinkScanSkipsPlaceholderPool(t *testing.T) {
	home, project := walkSandbox(t, 0)
	state := jail.StateDir(home, func(string) string { return "" })
	pool := filepath.Join(state, "placeholders", "pool")
	for i := 0; i < 300; i++ {
		if err := os.MkdirAll(filepath.Join(pool, fmt.Sprintf("d-%012x", i)), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	log := filepath.Join(state, "decisions.jsonl")
	if err := os.WriteFile(log, []byte(`{"host":"secret.example.test"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(project, "log-copy")
	if err := os.Link(log, link); err != nil {
		t.Fatal(err)
	}
	lowWalkLimit(t, 100)
	f, err := Gather(&jail.Policy{ProjectRoot: project}, home, project)
	if err != nil {
		t.Fatalf("Gather with a pool larger than the walk limit: %v", err)
	}
	if !contains(f.HardLinks, link) {
		t.Fatalf("HardLinks = %q, want %s (a second name of the decision log)", f.HardLinks, link)
	}
}
