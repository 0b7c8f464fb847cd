package control

import (
	"strings"
	"syscall"
	"testing"
)

// A process of the same uid in another user namespace (as every jailed
// process is) gets no reply, and the same process in this namespace does.
func TestPeerInAnotherUserNamespaceRefused(t *testing.T) {
	_, c := newTestHub(t, HubConfig{})
	if out := runChild(t, c.Path, nil); !strings.HasPrefix(out, "reply {") {
		t.Fatalf("a client in the same namespace got %q", out)
	}
	out := runChild(t, c.Path, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER})
	if out != "refused" {
		t.Fatalf("a client in another user namespace got %q", out)
	}
}
