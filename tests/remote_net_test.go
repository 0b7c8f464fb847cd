package tests

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteNetworkIsLocalProxy: the remote command's network is the
// local proxy, across ssh: a placeholder it sends to a bound host is
// replaced by the real value here, on the way to a local upstream, and the
// local decision log records the request; a host the policy does not
// allow is refused and logged here; the real value appears nowhere on
// the remote, in the command's output or the remote user's home.
func TestRemoteNetworkIsLocalProxy(t *testing.T) {
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		d := startRemoteSSHD(t, "")
		d.client(s, true, "")
		g := setupSecrets(t, s, []string{"MY_API_KEY"}, nil, nil)
		real := g.Real["MY_API_KEY"]
		const fromEnvFile = "bound-from-envfile-4f3e2d1c0b9a"
		s.WriteFile(s.Project+"/.env", "MY_API_KEY="+fromEnvFile+"\n", 0o600)
		r := s.Jail("--remote", d.Target(), "--", "sh", "-c", `echo "ph=$MY_API_KEY"; echo "session=$JAIL_SESSION"
curl -sS -m 20 -H "Authorization: Bearer $MY_API_KEY" https://`+boundHost+`/remote-inject; echo "bound=$?"
. ./.env; curl -sS -m 20 -H "X-Bound: $MY_API_KEY" https://`+boundHost+`/envfile-inject; echo "envfile=$?"; echo "envph=$MY_API_KEY"
curl -sS -m 20 -o /dev/null https://denied.example.test/x; echo "denied=$?"`)
		if r.Code != 0 {
			t.Fatalf("remote run:\n%s", r)
		}
		g.noReal(t, "the remote command's output", r.Stdout+r.Stderr)
		if !strings.Contains(r.Stdout, "ok /remote-inject") || !strings.Contains(r.Stdout, "bound=0") {
			t.Fatalf("the bound host was not reached through the proxy:\n%s", r)
		}
		if strings.Contains(r.Stdout, "denied=0") {
			t.Errorf("a host the policy does not allow was reached:\n%s", r)
		}
		got := g.Bound.At("/remote-inject")
		if len(got) != 1 || got[0].Header.Get("Authorization") != "Bearer "+real {
			t.Fatalf("the upstream did not get the real value injected: %v", got)
		}
		if strings.Contains(r.Stdout, fromEnvFile) {
			t.Errorf("the .env value reached the remote command:\n%s", r)
		}
		if got := g.Bound.At("/envfile-inject"); len(got) != 1 || got[0].Header.Get("X-Bound") != fromEnvFile {
			t.Errorf("a .env secret's placeholder sent remotely was not injected here: %v\n%s", got, r)
		}
		log := string(mustRead(t, decisionLog(s)))
		session := sessionOf(t, r)
		if !strings.Contains(log, session) || !strings.Contains(log, boundHost) || !strings.Contains(log, "denied.example.test") {
			t.Errorf("the local decision log does not record the remote session's requests (session %s):\n%s", session, log)
		}
		filepath.WalkDir(d.Home(), func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.Type().IsRegular() {
				if b, err := os.ReadFile(p); err == nil && (bytes.Contains(b, []byte(real)) || bytes.Contains(b, []byte(fromEnvFile))) {
					t.Errorf("the real value is on the remote in %s", p)
				}
			}
			return nil
		})
	})
}
