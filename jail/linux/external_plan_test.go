package linux

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// TestExternalPlanRelaysBytes: a plan whose proxy runs elsewhere binds the
// forwarded sockets (not the session directory) where the bridge looks,
// trusts the remote proxy's CA, and hands no socket over, which the
// forwarding would lose; a local plan still hands every proxy connection
// over, the capture's included, so that nothing of a local jail's traffic
// goes through the bridge, and its plan says nothing of ssh.
func TestExternalPlanRelaysBytes(t *testing.T) {
	pol := jail.Policy{ProjectRoot: "/home/u/proj"}
	local, err := Build(&pol, fakeFacts(nil, nil), []string{"sh"})
	if err != nil {
		t.Fatal(err)
	}
	f := fakeFacts(nil, nil)
	f.External = "/tmp/jail-r.abcdefghij"
	ext, err := Build(&pol, f, []string{"sh"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		p       *Plan
		sockets string
		ca      string
		handOff bool
	}{
		{"local", local, f.SessionDir, "/home/u/.config/jail/ca/ca.pem", true},
		{"external", ext, "/tmp/jail-r.abcdefghij/net", "/tmp/jail-r.abcdefghij/ca.pem", false},
	} {
		n := c.p.Net
		if n.Capture.HandOff != c.handOff || n.Capture.Dial != "unix:"+NetDir+"/capture.sock" {
			t.Errorf("%s: capture %+v, want HandOff %v", c.name, n.Capture, c.handOff)
		}
		for _, r := range n.Relays {
			if (strings.HasSuffix(r.Dial, "/http.sock") || strings.HasSuffix(r.Dial, "/socks.sock")) && r.HandOff != c.handOff {
				t.Errorf("%s: relay %s, want HandOff %v", c.name, r, c.handOff)
			}
		}
		if op := findOp(c.p, NetDir); op == nil || op.Src != c.sockets || op.Kind != "ro-bind" {
			t.Errorf("%s: %s bound from %+v, want %s read-only", c.name, NetDir, op, c.sockets)
		}
		if op := findOp(c.p, CABundlePath); op == nil || op.Src != c.ca {
			t.Errorf("%s: %s bound from %+v, want %s", c.name, CABundlePath, op, c.ca)
		}
	}
	if s := local.String(); strings.Contains(s, "over ssh") || !strings.Contains(s, "handed over") {
		t.Errorf("the local plan speaks of ssh, or hands no socket over:\n%s", s)
	}
	if s := ext.String(); !strings.Contains(s, "over ssh") || strings.Contains(s, "handed over") {
		t.Errorf("the external plan does not say its proxy is over ssh, or hands a socket over:\n%s", s)
	}
}

func findOp(p *Plan, dest string) *Op {
	for i := range p.Ops {
		if p.Ops[i].Dest == dest {
			return &p.Ops[i]
		}
	}
	return nil
}

// TestExternalPlanGolden: the whole plan of a jail run from another
// machine, as `jail plan` would print it there: the forwarded sockets,
// the remote proxy's CA and the link, and no socket handed over.
func TestExternalPlanGolden(t *testing.T) {
	f := fakeFacts(nil, nil)
	f.External = "/tmp/jail-r.abcdefghij"
	p, err := Build(&jail.Policy{ProjectRoot: "/home/u/proj"}, f, []string{"sh"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, filepath.Join("testdata", "plan", "external.golden"), p.String())
}
