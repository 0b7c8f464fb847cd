package learn

import (
	"bytes"
	"flag"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"syscall"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

var facts = Facts{
	Home:       "/home/u",
	Project:    "/home/u/src/proj",
	SystemDirs: []string{"/usr", "/etc", "/opt", "/bin", "/lib", "/lib64", "/sbin"},
}

const (
	enoent = int(syscall.ENOENT)
	eacces = int(syscall.EACCES)
)

func TestSynthesize(t *testing.T) {
	tests := []struct {
		name   string
		events []Event
		reqs   []Request
		facts  Facts // the package's facts when zero
		want   Report
	}{
		{
			name:   "config app dir collapses",
			events: []Event{{Kind: Open, Path: "/home/u/.config/tool/a/b/c"}, {Kind: Open, Path: "/home/u/.config/tool/d"}},
			want:   Report{Profile: Profile{AllowRead: []string{"~/.config/tool"}}},
		},
		{
			name: "cache, share, state collapse",
			events: []Event{
				{Kind: Create, Path: "/home/u/.cache/tool/x/y"},
				{Kind: Open, Path: "/home/u/.local/share/tool/db"},
				{Kind: Mkdir, Path: "/home/u/.local/state/tool/logs"},
			},
			want: Report{Profile: Profile{AllowRead: []string{"~/.local/share/tool"}, AllowWrite: []string{"~/.cache/tool", "~/.local/state/tool"}}},
		},
		{
			// The profiles give each project these; a learned profile
			// applies to every project.
			name: "the jail's per-project caches never proposed",
			events: []Event{
				{Kind: Create, Path: "/home/u/.cache/jail/proj-0123456789ab/go-build/00/x-d", Write: true},
				{Kind: Open, Path: "/home/u/.cache/jail/proj-0123456789ab/pip/http/x"},
				{Kind: Mkdir, Path: "/home/u/.cache/jail"},
			},
			facts: Facts{Home: "/home/u", Project: "/home/u/src/proj", Allowed: []string{"/home/u/.cache/jail/proj-0123456789ab/go-build"}},
			want:  Report{Profile: Profile{}},
		},
		{
			name: "parents themselves and home never proposed",
			events: []Event{
				{Kind: Open, Path: "/home/u"}, {Kind: Open, Path: "/home/u/"}, {Kind: Open, Path: "/home/u/.config"},
				{Kind: Open, Path: "/home/u/.cache", Write: true}, {Kind: Open, Path: "/home/u/.local"},
				{Kind: Open, Path: "/home/u/.local/share"}, {Kind: Open, Path: "/home/u/.local/state"},
				{Kind: Open, Path: "/home"}, {Kind: Open, Path: "/"},
			},
			want: Report{Profile: Profile{}},
		},
		{
			name: "dot files and dot dirs",
			events: []Event{
				{Kind: Open, Path: "/home/u/.toolrc"},
				{Kind: Open, Path: "/home/u/.tool/x/y"},
				{Kind: Open, Path: "/home/u/.local/bin/tool"},
				{Kind: Open, Path: "/home/u/Documents/notes/a/b.txt"},
				{Kind: Open, Path: "/home/u/todo.txt"},
			},
			want: Report{Profile: Profile{AllowRead: []string{"~/.local/bin", "~/.tool", "~/.toolrc", "~/Documents/notes", "~/todo.txt"}}},
		},
		{
			name: "write anywhere wins over read",
			events: []Event{
				{Kind: Open, Path: "/home/u/.config/tool/settings"},
				{Kind: Rename, Path: "/home/u/.config/tool/settings.tmp"},
				{Kind: Unlink, Path: "/home/u/.tool/lock"},
				{Kind: Open, Path: "/home/u/.tool/data"},
			},
			want: Report{Profile: Profile{AllowWrite: []string{"~/.config/tool", "~/.tool"}}},
		},
		{
			name: "system, private and project paths left out",
			events: []Event{
				{Kind: Open, Path: "/usr/lib/x.so"}, {Kind: Open, Path: "/etc/hosts"}, {Kind: Open, Path: "/proc/self/maps"},
				{Kind: Open, Path: "/dev/null", Write: true}, {Kind: Create, Path: "/tmp/x"}, {Kind: Open, Path: "/sys/fs/cgroup"},
				{Kind: Create, Path: "/home/u/src/proj/out/a.o"}, {Kind: Open, Path: "/home/u/src/proj"}, {Kind: Open, Path: "/home/u/src"},
				{Kind: Open, Path: "/usrlocal/x/y/z"}, {Kind: Open, Path: "/run/jail/ca.pem"},
			},
			want: Report{Profile: Profile{AllowRead: []string{"/usrlocal/x/y"}}},
		},
		{
			name: "failed reads dropped, failed writes kept",
			events: []Event{
				{Kind: Open, Path: "/home/u/.config/opt/config.toml", Errno: enoent},
				{Kind: Open, Path: "/home/u/.toolrc", Errno: eacces},
				{Kind: Create, Path: "/home/u/.cache/tool/new/file", Errno: enoent},
				{Kind: Open, Path: "/home/u/.tool/log", Write: true, Errno: eacces},
			},
			want: Report{Profile: Profile{AllowWrite: []string{"~/.cache/tool", "~/.tool"}}},
		},
		{
			name: "secrets never proposed, reported",
			events: []Event{
				{Kind: Open, Path: "/home/u/.ssh/id_ed25519", Errno: eacces},
				{Kind: Open, Path: "/home/u/.ssh/known_hosts"},
				{Kind: Open, Path: "/home/u/.aws/credentials", Errno: enoent},
				{Kind: Open, Path: "/home/u/.gnupg/pubring.kbx"},
				{Kind: Open, Path: "/home/u/.kube/config"},
				{Kind: Create, Path: "/home/u/.docker/config.json"},
				{Kind: Open, Path: "/home/u/.netrc"},
				{Kind: Open, Path: "/home/u/.git-credentials"},
				{Kind: Open, Path: "/home/u/.npmrc"},
				{Kind: Open, Path: "/home/u/.pypirc"},
				{Kind: Open, Path: "/home/u/.config/gh/hosts.yml"},
				{Kind: Open, Path: "/home/u/.config/gh/config.yml"},
				{Kind: Open, Path: "/home/u/src/proj/.env"},
				{Kind: Open, Path: "/home/u/src/other/.env.local"},
				{Kind: Open, Path: "/home/u/.azure/accessTokens.json"},
				{Kind: Exec, Path: "/home/u/.cargo/credentials.toml"},
				{Kind: Open, Path: "/etc/ssl/certs/ca.pem"}, // system: already allowed, not a secret of the user
				{Kind: Open, Path: "/home/u/.environment"},  // not .env
			},
			want: Report{
				Profile: Profile{AllowRead: []string{"~/.environment"}},
				KeptDenied: []string{
					"tried to read ~/.aws/credentials: kept denied",
					"tried to read ~/.azure/accessTokens.json: kept denied",
					"tried to read ~/.config/gh/config.yml: kept denied",
					"tried to read ~/.config/gh/hosts.yml: kept denied",
					"tried to read ~/.git-credentials: kept denied",
					"tried to read ~/.gnupg/pubring.kbx: kept denied",
					"tried to read ~/.kube/config: kept denied",
					"tried to read ~/.netrc: kept denied",
					"tried to read ~/.npmrc: kept denied",
					"tried to read ~/.pypirc: kept denied",
					"tried to read ~/.ssh/id_ed25519: kept denied",
					"tried to read ~/.ssh/known_hosts: kept denied",
					"tried to read ~/src/other/.env.local: kept denied",
					"tried to read ~/src/proj/.env: kept denied",
					"tried to run ~/.cargo/credentials.toml: kept denied",
					"tried to write ~/.docker/config.json: kept denied",
				},
			},
		},
		{
			name: "a home under /tmp is still the home",
			events: []Event{
				{Kind: Open, Path: "/tmp/t1/home/.config/tool/settings"},
				{Kind: Mkdir, Path: "/tmp/t1/home/.cache/tool"},
				{Kind: Open, Path: "/tmp/t1/home/.ssh/id_ed25519", Errno: 2},
				{Kind: Open, Path: "/tmp/scratch", Write: true},
			},
			facts: Facts{Home: "/tmp/t1/home", Project: "/tmp/t1/project", SystemDirs: []string{"/usr", "/etc"}},
			want: Report{
				Profile:    Profile{AllowRead: []string{"~/.config/tool"}, AllowWrite: []string{"~/.cache/tool"}},
				KeptDenied: []string{"tried to read ~/.ssh/id_ed25519: kept denied"},
			},
		},
		{
			name: "mkdir -p and O_EXCL probes of what exists are no writes",
			events: []Event{
				{Kind: Mkdir, Path: "/home/u/.cache", Errno: 17},
				{Kind: Mkdir, Path: "/home/u/.local/share/app", Errno: 17},
				{Kind: Create, Path: "/home/u/.config/app/lock", Write: true, Errno: 17},
				{Kind: Mkdir, Path: "/home/u/.cache/app"},
			},
			want: Report{Profile: Profile{AllowWrite: []string{"~/.cache/app"}}},
		},
		{
			name: "secret read then written reported once as write",
			events: []Event{
				{Kind: Open, Path: "/home/u/.netrc"}, {Kind: Open, Path: "/home/u/.netrc", Write: true}, {Kind: Open, Path: "/home/u/.netrc"},
			},
			want: Report{KeptDenied: []string{"tried to write ~/.netrc: kept denied"}},
		},
		{
			name: "programs: successful execs, deduped, sorted",
			events: []Event{
				{Kind: Exec, Path: "/usr/local/bin/python3", Errno: enoent},
				{Kind: Exec, Path: "/usr/bin/python3"},
				{Kind: Exec, Path: "/usr/bin/git"},
				{Kind: Exec, Path: "/usr/bin/python3"},
				{Kind: Exec, Path: "/home/u/.local/bin/tool"},
			},
			want: Report{Profile: Profile{AllowRead: []string{"~/.local/bin"}, Programs: []string{"/home/u/.local/bin/tool", "/usr/bin/git", "/usr/bin/python3"}}},
		},
		{
			name: "domains",
			reqs: []Request{
				{Host: "api.tool.test", Port: 443, Allowed: true},
				{Host: "API.tool.test.", Port: 443, Allowed: true},
				{Host: "plain.test", Port: 80, Allowed: true},
				{Host: "alt.test", Port: 8443, Allowed: true},
				{Host: "::1", Port: 8080, Allowed: true},
				{Host: "evil.test", Port: 443, Allowed: false},
				{Host: "", Port: 443, Allowed: true},
			},
			want: Report{
				Profile:    Profile{Domains: []string{"[::1]:8080", "alt.test:8443", "api.tool.test", "plain.test"}},
				KeptDenied: []string{"tried to reach evil.test: kept denied"},
			},
		},
		{
			// The strict run's proxy lets a raw stream (SSH over 443, a
			// line protocol on 80) through only an entry naming the
			// port: "host" alone would let its HTTPS through and refuse
			// the stream the learning run saw work.
			name: "raw streams keep their port, on 80 and 443 too",
			reqs: []Request{
				{Host: "ssh.tool.test", Port: 443, Allowed: true, Raw: true},
				{Host: "line.tool.test", Port: 80, Allowed: true, Raw: true},
				{Host: "db.tool.test", Port: 5432, Allowed: true, Raw: true},
				{Host: "both.tool.test", Port: 443, Allowed: true},
				{Host: "both.tool.test", Port: 443, Allowed: true, Raw: true},
				{Host: "fd00::1", Port: 443, Allowed: true, Raw: true},
				{Host: "203.0.113.7", Port: 443, Raw: true},
			},
			want: Report{
				Profile: Profile{Domains: []string{
					"[fd00::1]:443", "both.tool.test", "both.tool.test:443", "db.tool.test:5432", "line.tool.test:80", "ssh.tool.test:443",
				}},
				KeptDenied: []string{"tried to reach 203.0.113.7:443: kept denied"},
			},
		},
		{
			name: "nested entries minimized; relative paths ignored",
			events: []Event{
				{Kind: Open, Path: "/home/u/Documents"},
				{Kind: Open, Path: "/home/u/Documents/notes/x"},
				{Kind: Open, Path: "/srv/data/a", Write: true},
				{Kind: Open, Path: "/srv/data/b"},
				{Kind: Open, Path: "relative/path"},
			},
			want: Report{Profile: Profile{AllowRead: []string{"~/Documents"}, AllowWrite: []string{"/srv/data"}}},
		},
		{
			name: "read-only paths reported, files only in the learning run not proposed, forwards noted",
			events: []Event{
				{Kind: Open, Path: "/home/u/.bashrc", Write: true},
				{Kind: Unlink, Path: "/home/u/.profile", Errno: 16},
				{Kind: Open, Path: "/home/u/.bashrc"},
				{Kind: Create, Path: "/home/u/.toolrc", Write: true},
				{Kind: Create, Path: "/home/u/.keptrc", Write: true},
				{Kind: Rename, Path: "/home/u/.keptrc.tmp", Write: true},
				{Kind: Mkdir, Path: "/home/u/work/a/b"},
			},
			reqs: []Request{{Host: "127.0.0.1", Port: 8080, Allowed: true, Forward: true}},
			facts: Facts{
				Home: "/home/u", Project: "/home/u/proj", SystemDirs: []string{"/usr"},
				ReadOnly: []string{"/home/u/.bashrc", "/home/u/.profile"},
				Exists:   func(p string) bool { return p == "/home/u/.keptrc" || p == "/home/u/.bashrc" },
			},
			want: Report{
				Profile: Profile{AllowRead: []string{"~/.bashrc"}, AllowWrite: []string{"~/.keptrc", "~/work/a"}},
				KeptDenied: []string{
					"reached the host's port 8080 through -f: not proposed (jail.json cannot grant it; pass -f 8080 again)",
					"tried to write ~/.bashrc: kept read-only",
					"tried to write ~/.profile: kept read-only",
					"wrote ~/.keptrc.tmp, which exists only in the learning run: not proposed (every jail's throwaway home lets the command write it again)",
					"wrote ~/.toolrc, which exists only in the learning run: not proposed (every jail's throwaway home lets the command write it again)",
				},
			},
		},
		{
			name: "a directory made in the learning run is proposed, however it was opened",
			events: []Event{
				{Kind: Open, Path: "/home/u/work"}, // mkdir -p opens each level
				{Kind: Mkdir, Path: "/home/u/work/a"},
				{Kind: Open, Path: "/home/u/work/a/b/f", Write: true},
				{Kind: Open, Path: "/home/u/data"}, // a directory it only listed
				{Kind: Open, Path: "/home/u/data/x/y"},
			},
			facts: Facts{Home: "/home/u", Project: "/home/u/proj", Exists: func(string) bool { return false }},
			want:  Report{Profile: Profile{AllowRead: []string{"~/data", "~/work"}, AllowWrite: []string{"~/work/a"}}},
		},
		{
			name: "outside the home: no wider than the policy allowed, else three levels",
			events: []Event{
				{Kind: Open, Path: "/var/cache/agents/node_modules/x/index.js"},
				{Kind: Exec, Path: "/var/cache/agents/node_modules/.bin/tool"},
				{Kind: Open, Path: "/var/lib/app/db/x", Write: true},
				{Kind: Open, Path: "/data/set/file"},
			},
			facts: Facts{Home: "/home/u", Project: "/home/u/proj", SystemDirs: []string{"/usr"}, Allowed: []string{"/var/cache/agents", "/home/u"}},
			want: Report{Profile: Profile{
				AllowRead:  []string{"/data/set", "/var/cache/agents"},
				AllowWrite: []string{"/var/lib/app"},
				Programs:   []string{"/var/cache/agents/node_modules/.bin/tool"},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := facts
			if tt.facts.Home != "" {
				f = tt.facts
			}
			got := Synthesize(tt.events, tt.reqs, f)
			norm(&got)
			norm(&tt.want)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("got  %#v\nwant %#v", got, tt.want)
			}
		})
	}
}

// norm treats nil and empty lists alike.
func norm(r *Report) {
	for _, l := range []*[]string{&r.Profile.AllowRead, &r.Profile.AllowWrite, &r.Profile.Domains, &r.Profile.Programs, &r.KeptDenied} {
		if len(*l) == 0 {
			*l = nil
		}
	}
}

// scripted is the trace of the learning test (the script itself is
// the jail's command, so its own exec is not traced): read
// ~/.config/tool/settings, write ~/.cache/tool/x, exec python3, try
// ~/.ssh/id_ed25519, fetch from api.tool.test — with the noise a real run
// has around it.
func scripted() ([]Event, []Request) {
	ev := []Event{
		{Kind: Open, Path: "/etc/ld.so.cache", Pid: 100},
		{Kind: Open, Path: "/lib/x86_64-linux-gnu/libc.so.6", Pid: 100},
		{Kind: Open, Path: "/home/u/src/proj/script.sh", Pid: 100},
		{Kind: Open, Path: "/home/u/.config/tool/settings", Pid: 100},
		{Kind: Open, Path: "/home/u/.config/tool", Pid: 100},
		{Kind: Mkdir, Path: "/home/u/.cache/tool", Pid: 100, Errno: int(syscall.EEXIST)},
		{Kind: Open, Path: "/home/u/.cache/tool/x", Write: true, Pid: 100},
		{Kind: Exec, Path: "/usr/local/bin/python3", Pid: 101, Errno: enoent},
		{Kind: Exec, Path: "/usr/bin/python3", Pid: 101},
		{Kind: Open, Path: "/usr/lib/python3.11/os.py", Pid: 101},
		{Kind: Open, Path: "/home/u/.local/lib/python3.11/site-packages", Pid: 101, Errno: enoent},
		{Kind: Open, Path: "/proc/self/status", Pid: 101},
		{Kind: Open, Path: "/dev/null", Write: true, Pid: 101},
		{Kind: Open, Path: "/tmp/tmp1234", Write: true, Pid: 101},
		{Kind: Open, Path: "/home/u/.ssh/id_ed25519", Pid: 100, Errno: eacces},
		{Kind: Open, Path: "/etc/ssl/certs/ca-certificates.crt", Pid: 101},
		{Kind: Open, Path: "/home/u/.pythonrc.py", Pid: 101, Errno: enoent},
		{Kind: Connect, Pid: 101},
	}
	reqs := []Request{{Host: "api.tool.test", Port: 443, Allowed: true}, {Host: "api.tool.test", Port: 443, Allowed: true}}
	return ev, reqs
}

func TestScriptedTrace(t *testing.T) {
	ev, reqs := scripted()
	r := Synthesize(ev, reqs, facts)
	want := Report{
		Profile: Profile{
			AllowRead:  []string{"~/.config/tool"},
			AllowWrite: []string{"~/.cache/tool"},
			Domains:    []string{"api.tool.test"},
			Programs:   []string{"/usr/bin/python3"},
		},
		KeptDenied: []string{"tried to read ~/.ssh/id_ed25519: kept denied"},
	}
	if !reflect.DeepEqual(r, want) {
		t.Fatalf("got  %#v\nwant %#v", r, want)
	}
	golden(t, "scripted.json.golden", r.Profile.JSON())
	golden(t, "scripted.summary.golden", []byte(r.Summary()))
	golden(t, "scripted.file.golden", r.File("tool", "ebpf"))
}

func TestEmptyJSON(t *testing.T) {
	golden(t, "empty.json.golden", Synthesize(nil, nil, facts).Profile.JSON())
}

func TestDeterministic(t *testing.T) {
	ev, reqs := scripted()
	// Add more variety so ordering matters in several maps.
	ev = append(ev,
		Event{Kind: Open, Path: "/home/u/.toolrc"},
		Event{Kind: Open, Path: "/home/u/.tool/a/b", Write: true},
		Event{Kind: Open, Path: "/home/u/.aws/config"},
		Event{Kind: Open, Path: "/home/u/.aws/config", Write: true},
		Event{Kind: Exec, Path: "/usr/bin/git"},
	)
	reqs = append(reqs, Request{Host: "b.test", Port: 8080, Allowed: true}, Request{Host: "a.test", Allowed: true}, Request{Host: "z.test"})
	base := Synthesize(ev, reqs, facts)
	wantJSON, wantSum := base.Profile.JSON(), base.Summary()
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 50; i++ {
		e := append([]Event(nil), ev...)
		q := append([]Request(nil), reqs...)
		rng.Shuffle(len(e), func(a, b int) { e[a], e[b] = e[b], e[a] })
		rng.Shuffle(len(q), func(a, b int) { q[a], q[b] = q[b], q[a] })
		r := Synthesize(e, q, facts)
		if !reflect.DeepEqual(r, base) || !bytes.Equal(r.Profile.JSON(), wantJSON) || r.Summary() != wantSum {
			t.Fatalf("shuffle %d changed the output:\n%s\n%s", i, r.Profile.JSON(), r.Summary())
		}
	}
}

func TestJSONSortsUnsortedProfile(t *testing.T) {
	p := Profile{AllowRead: []string{"~/b", "~/a"}, Domains: []string{"z.test", "a.test"}}
	q := Profile{AllowRead: []string{"~/a", "~/b"}, Domains: []string{"a.test", "z.test"}}
	if !bytes.Equal(p.JSON(), q.JSON()) {
		t.Fatalf("JSON depends on input order:\n%s\n%s", p.JSON(), q.JSON())
	}
	if p.AllowRead[0] != "~/b" {
		t.Fatal("JSON mutated the profile")
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	file := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(file, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s mismatch:\ngot:\n%s\nwant:\n%s", name, got, want)
	}
}
