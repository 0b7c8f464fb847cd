package tests

import (
	"os"
	"testing"
	"time"
)

// TestLeftBehindProcessCannotUseTheCleanup: when the command exits, jail
// cleans up (placeholders back to the pool, proxy stopped). A process the
// command leaves behind, in a session of its own and deaf to every signal
// it may ignore, keeps trying to create protected paths the placeholders
// hold: it must be dead before a placeholder goes, so that nothing
// appears on the host, then or later.
func TestLeftBehindProcessCannotUseTheCleanup(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		before := listTree(t, s.Project)
		const survivor = `trap '' HUP INT TERM QUIT USR1 USR2
touch started
while :; do
	echo x > .envrc 2>/dev/null && echo x > escaped
	mkdir .vscode/x 2>/dev/null && echo x > escaped
	echo '{}' > .mcp.json 2>/dev/null && echo x > escaped
done`
		r := s.Jail("--", "sh", "-c", "setsid sh -c \""+survivor+"\" </dev/null >/dev/null 2>&1 & while [ ! -e started ]; do sleep 0.01; done; rm started; exit 7")
		if r.Code != 7 {
			t.Fatalf("want the command's exit code 7:\n%s", r)
		}
		time.Sleep(300 * time.Millisecond) // what a survivor would do, it would do now
		for _, p := range []string{"escaped", ".envrc", ".vscode", ".mcp.json"} {
			if _, err := os.Lstat(s.Project + "/" + p); err == nil {
				t.Errorf("%s exists on the host after the jail exited: a process outlived the jail's cleanup", p)
			}
		}
		sameTree(t, "after the jail with a process left behind", before, listTree(t, s.Project))
	})
}
