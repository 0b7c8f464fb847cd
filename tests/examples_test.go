package tests

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The examples/ projects, each run with its real test command inside the
// jail, under the jail.json it ships.

// Secrets planted in each example copy where its jail.json hides them.
const (
	exampleDBSecret  = "DB-PASSWORD-77aa88bb99cc"
	examplePEMSecret = "PEM-PRIVATE-KEY-0d0e0f101112"
)

// exampleProject is one directory under examples/ and how to test it.
type exampleProject struct {
	dir  string   // under examples/
	argv []string // the project's own test command
	env  func(s *Sandbox) []string
	// pass matches the runner's success lines (all must match).
	pass []*regexp.Regexp
	// probe is a test file added to the copy, run by the same command: it
	// reads the hidden files (paths relative to the project) and writes
	// what it got to jail-probe.out at the project root.
	probePath, probe string
}

var exampleProjects = []exampleProject{
	{
		dir:  "node-web-app",
		argv: []string{"node", "--test"},
		pass: []*regexp.Regexp{
			regexp.MustCompile(`(?m)^(# |ℹ )pass [1-9][0-9]*$`),
			regexp.MustCompile(`(?m)^(# |ℹ )fail 0$`),
		},
		probePath: "test/zz-jail-probe.test.js",
		probe: `'use strict';
const test = require('node:test');
const fs = require('node:fs');
test('jail probe reads the hidden files', () => {
  const out = [];
  for (const f of ['.env', 'secrets/db-password', 'certs/server.pem']) {
    try { out.push(f + ': ' + fs.readFileSync(f, 'utf8')); } catch (e) { out.push(f + ': ' + e.code); }
  }
  fs.writeFileSync('jail-probe.out', out.join('\n') + '\n');
});
`,
	},
	{
		dir:  "python-service",
		argv: []string{"python3", "-m", "unittest", "-v"},
		pass: []*regexp.Regexp{
			regexp.MustCompile(`(?m)^Ran [1-9][0-9]* tests? in `),
			regexp.MustCompile(`(?m)^OK$`),
		},
		probePath: "tests/test_zz_jail_probe.py",
		probe: `import unittest


class JailProbe(unittest.TestCase):
    def test_reads_hidden_files(self):
        out = []
        for f in [".env", "secrets/db-password", "certs/server.pem"]:
            try:
                with open(f) as fh:
                    out.append(f + ": " + fh.read())
            except OSError as e:
                out.append("%s: %s" % (f, type(e).__name__))
        with open("jail-probe.out", "w") as fh:
            fh.write("\n".join(out) + "\n")
`,
	},
	{
		dir:  "go-module",
		argv: []string{"go", "test", "./..."},
		env: func(s *Sandbox) []string {
			return []string{
				"GOCACHE=" + s.Project + "/.cache/go-build",
				"GOPATH=" + s.Project + "/.cache/gopath",
				"GOMODCACHE=" + s.Project + "/.cache/mod",
				"GOTOOLCHAIN=local",
				"GOFLAGS=-mod=mod",
			}
		},
		pass: []*regexp.Regexp{
			regexp.MustCompile(`(?m)^ok\s+example\.com/wordcount/wordcount\s`),
		},
		probePath: "wordcount/zz_jail_probe_test.go",
		probe: `package wordcount

import (
	"os"
	"strings"
	"testing"
)

func TestJailProbe(t *testing.T) {
	var out []string
	for _, f := range []string{".env", "secrets/db-password", "certs/server.pem"} {
		b, err := os.ReadFile("../" + f)
		if err != nil {
			out = append(out, f+": "+err.Error())
			continue
		}
		out = append(out, f+": "+string(b))
	}
	if err := os.WriteFile("../jail-probe.out", []byte(strings.Join(out, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}
`,
	},
}

// The denyRead entries every example's jail.json carries.
var exampleDenyRead = []string{".env", ".env.*", "secrets/**", "**/*.pem"}

func TestExampleNodeWebApp(t *testing.T)    { runExample(t, exampleProjects[0]) }
func TestExamplePythonService(t *testing.T) { runExample(t, exampleProjects[1]) }
func TestExampleGoModule(t *testing.T)      { runExample(t, exampleProjects[2]) }

func runExample(t *testing.T, ex exampleProject) {
	src := filepath.Join("..", "examples", ex.dir)
	var policy struct {
		Filesystem struct {
			DenyRead []string `json:"denyRead"`
		} `json:"filesystem"`
		Command struct {
			Deny []string `json:"deny"`
		} `json:"command"`
	}
	raw, err := os.ReadFile(filepath.Join(src, "jail.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &policy); err != nil {
		t.Fatalf("%s/jail.json: %v", src, err)
	}
	for _, want := range exampleDenyRead {
		if !exampleHas(policy.Filesystem.DenyRead, want) {
			t.Errorf("%s/jail.json: denyRead lacks %q (has %q)", src, want, policy.Filesystem.DenyRead)
		}
	}
	if !exampleHas(policy.Command.Deny, "git push") {
		t.Errorf("%s/jail.json: command.deny lacks \"git push\" (has %q)", src, policy.Command.Deny)
	}
	if _, err := os.Stat(filepath.Join(src, "README.md")); err != nil {
		t.Errorf("%s has no README.md: %v", src, err)
	}

	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		copyExample(t, s, src)
		if ex.env != nil {
			s.Env = append(s.Env, ex.env(s)...)
		}
		// The files the policy hides, with real values, as a developer has them.
		s.WriteFile(s.Project+"/.env", "API_KEY="+EnvSecret+"\n", 0o600)
		hidden := []string{".env", "certs/server.pem"}
		// A hidden directory is an empty, listable, read-only one inside:
		// tools that walk the whole tree (node --test, go test ./...) work.
		s.WriteFile(s.Project+"/secrets/db-password", exampleDBSecret+"\n", 0o600)
		hidden = append(hidden, "secrets")
		s.WriteFile(s.Project+"/certs/server.pem", "-----BEGIN PRIVATE KEY-----\n"+examplePEMSecret+"\n", 0o600)
		s.WriteFile(filepath.Join(s.Project, ex.probePath), ex.probe, 0o644)

		// The example's jail.json is the policy applied.
		plan := s.Jail(append([]string{"plan", "--"}, ex.argv...)...)
		if plan.Code != 0 {
			t.Fatalf("jail plan failed:\n%s", plan)
		}
		if !examplePlanLine(plan.Stdout, "config", s.Project+"/jail.json") {
			t.Errorf("plan does not name the example's jail.json as config:\n%s", plan.Stdout)
		}
		for _, h := range hidden {
			if !examplePlanMasked(plan.Stdout, filepath.Join(s.Project, h)) {
				t.Errorf("plan does not mask %s (denyRead):\n%s", h, plan.Stdout)
			}
		}
		for _, c := range policy.Command.Deny {
			if !regexp.MustCompile(`(?m)^\s*deny:.*` + regexp.QuoteMeta(c)).MatchString(plan.Stdout) {
				t.Errorf("plan's command rules lack %q:\n%s", c, plan.Stdout)
			}
		}

		// The project's real test command, inside the jail.
		r := s.Jail(append([]string{"--"}, ex.argv...)...)
		if r.Code != 0 {
			t.Fatalf("jail -- %s: want exit 0\n%s", strings.Join(ex.argv, " "), r)
		}
		out := r.Stdout + r.Stderr
		for _, re := range ex.pass {
			if !re.MatchString(out) {
				t.Errorf("jail -- %s: no line matching %q\n%s", strings.Join(ex.argv, " "), re, r)
			}
		}
		noSecret(t, r, "test run", EnvSecret, exampleDBSecret, examplePEMSecret, SSHKeySecret, AWSSecret)

		// The probe ran inside the test process and got none of the real values.
		probe, err := os.ReadFile(s.Project + "/jail-probe.out")
		if err != nil {
			t.Fatalf("the probe test did not run inside the jail: %v\n%s", err, r)
		}
		for _, f := range []string{".env: ", "secrets/db-password: ", "certs/server.pem: "} {
			if !strings.Contains(string(probe), f) {
				t.Errorf("probe output lacks %q:\n%s", f, probe)
			}
		}
		for _, sec := range []string{EnvSecret, exampleDBSecret, examplePEMSecret} {
			if strings.Contains(string(probe), sec) {
				t.Errorf("the test process read %q from a denyRead file:\n%s", sec, probe)
			}
		}
		// Control: the files really hold the values on the host.
		if !strings.Contains(hostFile(t, s.Project+"/.env"), EnvSecret) {
			t.Errorf("host .env lost its value")
		}

		// A command the policy denies is refused.
		d := s.Sh("git push origin main; echo \"##push=$?\"")
		if !strings.Contains(d.Stderr, "denied (git push)") || strings.Contains(d.Stdout, "##push=0") {
			t.Errorf("git push was not refused by command.deny:\n%s", d)
		}
	})
}

// copyExample copies the example directory into the sandbox project, owned
// by the runner, keeping file modes; build output is left behind.
func copyExample(t *testing.T, s *Sandbox, src string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		dst := filepath.Join(s.Project, rel)
		if d.IsDir() {
			switch d.Name() {
			case "__pycache__", "node_modules":
				return filepath.SkipDir
			}
			if err := os.MkdirAll(dst, 0o755); err != nil {
				return err
			}
			s.chownUp(dst)
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s.WriteFile(dst, string(b), info.Mode().Perm())
		return nil
	})
	if err != nil {
		t.Fatalf("copying %s: %v", src, err)
	}
}

// examplePlanLine reports whether a plan line starts with key followed by value.
func examplePlanLine(plan, key, value string) bool {
	for _, l := range lines(plan) {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == key && f[1] == value {
			return true
		}
	}
	return false
}

// examplePlanMasked reports whether the plan's mounts mask path for denyRead.
func examplePlanMasked(plan, path string) bool {
	for _, l := range lines(plan) {
		f := strings.Fields(l)
		if len(f) >= 2 && strings.HasPrefix(f[0], "mask") && f[1] == path && strings.Contains(l, "denyRead") {
			return true
		}
	}
	return false
}

func exampleHas(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
