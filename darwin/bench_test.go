package darwin

import (
	"testing"

	"github.com/jailsh/jail/jail"
)

// BenchmarkBuild is what a macOS run pays to turn the resolved policy of
// an agent into its Seatbelt profile and parameters: planning and
// generation together, the facts already gathered.
func BenchmarkBuild(b *testing.B) {
	const home, project = "/Users/alice", "/Users/alice/src/app"
	pol := realPolicy(b, jail.Options{}, "claude", project, home, "")
	f := fakeFacts(project, home)
	argv := []string{"claude"}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Build(pol, f, argv); err != nil {
			b.Fatal(err)
		}
	}
}
