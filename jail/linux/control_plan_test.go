package linux

import (
	"slices"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail"
)

// The runtime directory holds every session's sockets and the control
// sockets: wherever a bind would show it, an empty tmpfs hides it, made
// first when it is missing; where nothing shows it, nothing is added.
func TestHideControl(t *testing.T) {
	tests := []struct {
		name      string
		allowRead []string
		extra     map[string]PathInfo
		mask      bool
		create    bool
	}{
		{name: "not shown", mask: false},
		{name: "runtime dir shown", allowRead: []string{"/run/user/1000"},
			extra: map[string]PathInfo{"/run/user/1000": {Exists: true, Dir: true}, "/run/user/1000/jail": {Exists: true, Dir: true}}, mask: true},
		{name: "missing runtime dir shown", allowRead: []string{"/run/user/1000"},
			extra: map[string]PathInfo{"/run/user/1000": {Exists: true, Dir: true}}, mask: true, create: true},
		{name: "parent shown", allowRead: []string{"/run"},
			extra: map[string]PathInfo{"/run": {Exists: true, Dir: true}, "/run/user/1000/jail": {Exists: true, Dir: true}}, mask: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := fakeFacts(tc.extra, nil)
			p, err := Build(&jail.Policy{ProjectRoot: "/home/u/proj", AllowRead: tc.allowRead}, f, []string{"true"})
			if err != nil {
				t.Fatal(err)
			}
			i := slices.IndexFunc(p.Ops, func(o Op) bool { return o.Dest == "/run/user/1000/jail" })
			if got := i >= 0 && p.Ops[i].Kind == "mask-dir"; got != tc.mask {
				t.Fatalf("masked %v, want %v:\n%s", got, tc.mask, p)
			}
			if got := slices.Contains(p.CreateDirs, "/run/user/1000/jail"); got != tc.create {
				t.Fatalf("created %v, want %v", got, tc.create)
			}
			if tc.mask && !slices.Contains(hiddenPaths(p, f.SessionDir), "/run/user/1000/jail") {
				t.Fatalf("hiddenPaths does not name the mask")
			}
			if tc.mask && !strings.Contains(strings.Join(p.BwrapArgs(), " "), "--tmpfs /run/user/1000/jail") {
				t.Fatalf("no tmpfs in bubblewrap's arguments")
			}
		})
	}
}
