package linux

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/credstores"
	"github.com/jailsh/jail/jail/learn"
)

// One list of credential stores for every mode: each store is what
// learning reports "kept denied" (at its root and below), and the plan of
// a learning run, which shows the whole home, masks it.
func TestCredentialStoresAreOneList(t *testing.T) {
	home := "/home/u"
	extra := map[string]PathInfo{}
	for _, rel := range credstores.Home {
		dir := strings.HasSuffix(rel, "/")
		p := filepath.Join(home, rel)
		extra[p] = PathInfo{Exists: true, Dir: dir}
		if !learn.IsSecret(p, home) {
			t.Errorf("%s is masked by the jail but learning would propose it", p)
		}
		if dir && !learn.IsSecret(p+"/x/y", home) {
			t.Errorf("%s/x/y is masked by the jail but learning would propose it", p)
		}
	}
	pol := jail.Policy{ProjectRoot: "/home/u/proj", Mode: "learning", Network: jail.NetworkConfig{Unknown: "allow"}}
	plan, err := Build(&pol, fakeFacts(extra, nil), []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	masked := map[string]bool{}
	for _, op := range plan.Ops {
		if op.Kind == "mask" || op.Kind == "mask-dir" {
			masked[op.Dest] = true
		}
	}
	for p := range extra {
		if !masked[p] && !jail.CoveredBy(p, masked) {
			t.Errorf("%s is a credential store but the learning plan does not mask it", p)
		}
	}
}

// Deny beats allow: a path allowed inside a credential store masked whole
// is masked too.
func TestAllowInsideDeniedStoreIsMasked(t *testing.T) {
	extra := map[string]PathInfo{
		"/home/u/.aws": {Exists: true, Dir: true}, "/home/u/.aws/config": {Exists: true},
		"/home/u/.ssh/config": {Exists: true},
	}
	pol := jail.Policy{ProjectRoot: "/home/u/proj", AllowRead: []string{"/home/u/.aws/config", "/home/u/.ssh/config"}, Network: jail.NetworkConfig{Unknown: "deny"}}
	p, err := Build(&pol, fakeFacts(extra, nil), []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	last := map[string]string{}
	for _, op := range p.Ops {
		last[op.Dest] = op.Kind
	}
	for _, want := range []string{"/home/u/.aws/config", "/home/u/.ssh/config"} {
		if last[want] != "mask" {
			t.Errorf("%s is allowed inside a denied store but not masked (last op %q):\n%s", want, last[want], p)
		}
	}
}
