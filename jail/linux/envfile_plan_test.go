package linux

import (
	"testing"

	"github.com/jailsh/jail/jail"
)

// A .env linking into a tree the jail shows through a symlink (allowRead
// ~/link-dir -> ~/real-dir) is masked where the jail sees the target, under
// the link's directory, with one copy for every name of the file.
func TestPlanEnvFileThroughLinkedBind(t *testing.T) {
	f := fakeFacts(map[string]PathInfo{
		"/home/u/link-dir":            {Exists: true, Dir: true, Link: "/home/u/real-dir", Resolved: "/home/u/real-dir"},
		"/home/u/proj/.env.linked":    {Exists: true, Link: "/home/u/link-dir/app.env", Resolved: "/home/u/real-dir/app.env"},
		"/home/u/proj/.env.same":      {Exists: true, Link: ".env.linked", Resolved: "/home/u/real-dir/app.env"},
		"/home/u/proj/.env.inproject": {Exists: true, Link: "config/app.txt", Resolved: "/home/u/proj/config/app.txt"},
	}, map[string][]string{
		"/home/u/proj/**/.env.*": {"/home/u/proj/.env.inproject", "/home/u/proj/.env.linked", "/home/u/proj/.env.same"},
	})
	pol := jail.Policy{ProjectRoot: "/home/u/proj", AllowRead: []string{"/home/u/link-dir"}}
	p, err := Build(&pol, f, []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	masked := map[string]string{}
	for _, op := range p.Ops {
		if op.Why == "secrets masked" {
			masked[op.Dest] = op.Src
		}
	}
	if masked["/home/u/link-dir/app.env"] == "" || masked["/home/u/proj/config/app.txt"] == "" {
		t.Errorf("masked copies bound at %v; want /home/u/link-dir/app.env and /home/u/proj/config/app.txt", masked)
	}
	if len(p.EnvFiles) != 2 {
		t.Errorf("want one copy per file read (2), got %+v", p.EnvFiles)
	}
}
