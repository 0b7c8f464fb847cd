package tests

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Real tools work inside the jail: a jail that breaks them is not usable,
// and several attacks above are only meaningful if the same tools work.

func TestToolShell(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.MustSh(`set -e
			for i in 1 2 3; do echo "line $i"; done > out.txt
			wc -l < out.txt
			echo "$(pwd)"
			sort -r out.txt | head -1
			echo tmp > /tmp/t && cat /tmp/t
			printf 'piped\n' | tr a-z A-Z
			ls /usr/bin/env >/dev/null && echo usr-ok`)
		want := "3\n" + s.Project + "\nline 3\ntmp\nPIPED\nusr-ok\n"
		if r.Stdout != want {
			t.Errorf("shell output:\n%q\nwant\n%q", r.Stdout, want)
		}
		hostUnchanged(t, s.Project+"/out.txt", "line 1\nline 2\nline 3\n")
	})
}

func TestToolPython(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.Py(`
import json, os, subprocess, sqlite3, tempfile, hashlib, threading
with open("data.json", "w") as f:
    json.dump({"sum": sum(range(10))}, f)
db = sqlite3.connect(os.path.join(tempfile.mkdtemp(), "x.db"))
db.execute("create table t (v)"); db.execute("insert into t values (42)")
print(db.execute("select v from t").fetchone()[0])
print(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip())
print(hashlib.sha256(b"jail").hexdigest()[:8])
out = []
th = threading.Thread(target=lambda: out.append("thread"))
th.start(); th.join(); print(out[0])
`)
		if r.Code != 0 {
			t.Fatalf("python3 failed:\n%s", r)
		}
		if r.Stdout != "42\nsub\n7d72fa80\nthread\n" {
			t.Errorf("python3 output %q", r.Stdout)
		}
		hostUnchanged(t, s.Project+"/data.json", `{"sum": 45}`)
	})
}

func TestToolGit(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.MustSh(`set -e
			git status --short --branch
			echo change >> README.md
			git status --porcelain
			git diff --stat | tail -1
			git checkout -q -b feature
			git -c user.name=J -c user.email=j@example.test commit -qam 'inside'
			git log --format=%s -2
			git stash list | wc -l`)
		for _, want := range []string{"## main", " M README.md", "1 file changed", "inside\ninit\n"} {
			if !strings.Contains(r.Stdout, want) {
				t.Errorf("git output lacks %q:\n%s", want, r)
			}
		}
		if got := strings.TrimSpace(s.Host("git", "-C", s.Project, "rev-parse", "--abbrev-ref", "HEAD")); got != "feature" {
			t.Errorf("host HEAD = %q, want feature (the branch made inside)", got)
		}
	})
}

func TestToolNode(t *testing.T) {
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		r := s.Jail("--", "node", "-e", `
const fs = require("fs"), cp = require("child_process"), os = require("os");
fs.writeFileSync("node.txt", "from node\n");
console.log(cp.execSync("echo child").toString().trim());
console.log(os.homedir() === process.env.HOME);
const http = require("http");
const srv = http.createServer((q, a) => a.end("loopback-ok")).listen(0, "127.0.0.1", () => {
  http.get({host: "127.0.0.1", port: srv.address().port}, res => {
    let b = ""; res.on("data", d => b += d); res.on("end", () => { console.log(b); srv.close(); });
  });
});`)
		if r.Code != 0 {
			t.Fatalf("node failed:\n%s", r)
		}
		if r.Stdout != "child\ntrue\nloopback-ok\n" {
			t.Errorf("node output %q", r.Stdout)
		}
		hostUnchanged(t, s.Project+"/node.txt", "from node\n")
	})
}

func TestToolGoBuild(t *testing.T) {
	// The harness's PATH has /usr/local/go/bin first, then the system's.
	if _, err := os.Stat("/usr/local/go/bin/go"); err != nil {
		if _, err := exec.LookPath("go"); err != nil {
			t.Fatalf("no go toolchain on this machine; `make test` installs one: %v", err)
		}
	}
	t.Parallel()
	forEachRunner(t, func(t *testing.T, s *Sandbox) {
		t.Parallel()
		s.WriteFile(s.Project+"/go.mod", "module example.test/hello\n\ngo 1.21\n", 0o644)
		s.WriteFile(s.Project+"/main.go", `package main

import (
	"fmt"
	"os"
)

func main() {
	wd, _ := os.Getwd()
	fmt.Println("hello from go in", wd)
}
`, 0o644)
		s.Env = []string{"GOCACHE=" + s.Project + "/.cache/go-build", "GOPATH=" + s.Project + "/.gopath",
			"GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "CGO_ENABLED=0"}
		r := s.Sh("set -e; go version; go build -o hello . && ./hello")
		if r.Code != 0 {
			t.Fatalf("go build inside failed:\n%s", r)
		}
		if !strings.Contains(r.Stdout, "hello from go in "+s.Project+"\n") {
			t.Errorf("the built binary did not run:\n%s", r)
		}
		// The binary persists in the project and runs on the host too.
		if out, code := s.HostOut(s.Project, s.Project+"/hello"); code != 0 || !strings.Contains(out, "hello from go") {
			t.Errorf("host run of the binary built inside: %d %q", code, out)
		}
	})
}
