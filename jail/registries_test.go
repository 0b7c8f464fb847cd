package jail

import (
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"
)

// toolchainsDir is the testdata project and home the readers are pointed
// at.
func toolchainsDir(t *testing.T) (project, home string) {
	t.Helper()
	d, err := filepath.Abs("testdata/toolchains")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(d, "project"), filepath.Join(d, "home")
}

// install lays out a fake machine under a temporary directory: npm
// installed as <sys>/usr/lib/node_modules/npm with /usr/bin/npm a symbolic
// link into it, node and go binaries (never run), go.env under a GOROOT
// and pip's index.py under dist-packages. It returns the prefix and a PATH.
func install(t *testing.T) (sys, path string) {
	t.Helper()
	sys = t.TempDir()
	copyTo := func(src, dst string, mode os.FileMode) {
		b, err := os.ReadFile(filepath.Join("testdata/toolchains", src))
		if err != nil {
			t.Fatal(err)
		}
		writeTestFile(t, filepath.Join(sys, dst), string(b), mode)
	}
	npm := filepath.Join(sys, "usr/lib/node_modules/npm")
	copyTo("npm-definitions.js", "usr/lib/node_modules/npm/node_modules/@npmcli/config/lib/definitions/definitions.js", 0o644)
	writeTestFile(t, filepath.Join(npm, "bin/npm-cli.js"), "#!/usr/bin/env node\nthrow new Error('must never run')\n", 0o755)
	writeTestFile(t, filepath.Join(sys, "usr/bin/node"), "#!/bin/sh\necho must never run >&2; exit 1\n", 0o755)
	if err := os.Symlink("../lib/node_modules/npm/bin/npm-cli.js", filepath.Join(sys, "usr/bin/npm")); err != nil {
		t.Fatal(err)
	}
	copyTo("go.env", "usr/local/go/go.env", 0o644)
	writeTestFile(t, filepath.Join(sys, "usr/local/go/bin/go"), "#!/bin/sh\necho must never run >&2; exit 1\n", 0o755)
	copyTo("pip-index.py", "usr/lib/python3/dist-packages/pip/_internal/models/index.py", 0o644)
	return sys, filepath.Join(sys, "usr/local/go/bin") + ":" + filepath.Join(sys, "usr/bin")
}

func writeTestFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

// readWith runs one toolchain's reader over the testdata project and home
// (or the ones given) on the fake machine.
func readWith(t *testing.T, toolchain, command, project, cwd, home string, env map[string]string) *Registries {
	t.Helper()
	sys, path := install(t)
	if _, ok := env["PATH"]; !ok {
		env["PATH"] = path
	}
	r := newRegReader(project, cwd, home, func(k string) string { return env[k] })
	r.sys = sys
	r.read(toolchain, command)
	for i := range r.out.Hosts {
		r.out.Hosts[i].Setting = strings.ReplaceAll(r.out.Hosts[i].Setting, sys, "<sys>")
	}
	return r.out
}

// hosts lists "origin host setting" per registry, sorted.
func hosts(r *Registries, project string) []string {
	var out []string
	for _, h := range r.Hosts {
		out = append(out, h.Origin+" "+h.Host+" "+strings.ReplaceAll(h.Setting, project+"/", ""))
	}
	sort.Strings(out)
	return out
}

func wantHosts(t *testing.T, got []string, want ...string) {
	t.Helper()
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("registries:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func TestNpmRegistries(t *testing.T) {
	project, home := toolchainsDir(t)
	r := readWith(t, "node", "npm", project, filepath.Join(project, "sub"), home, map[string]string{})
	got := hosts(r, project)
	// The sub-directory's, the project's, the user's .npmrc, Yarn's and
	// Bun's files; the user's registry is set, so npm's default is not read.
	wantHosts(t, got,
		"project 127.0.0.1:4873 sub/.npmrc @sub:registry",
		"project project-registry.example.test .npmrc registry",
		"project corp-npm.example.test:8443 .npmrc @corp:registry",
		"user 127.0.0.1:4873 "+home+"/.npmrc registry",
		"project yarn-registry.example.test .yarnrc.yml npmRegistryServer",
		"project yarn-corp.example.test:444 .yarnrc.yml npmScopes.corp.npmRegistryServer",
		"project bun-registry.example.test bunfig.toml install.registry.url",
		"project bun-corp.example.test bunfig.toml install.scopes.corp",
		"project bun-other.example.test bunfig.toml install.scopes.other.url",
	)
	if len(r.Warnings) > 0 {
		t.Errorf("warnings: %v", r.Warnings)
	}
	for _, f := range []string{"sub/.npmrc", ".npmrc", ".yarnrc.yml", "bunfig.toml"} {
		b, _ := os.ReadFile(filepath.Join(project, f))
		if !containsFile(r.Files, ToolchainFile{filepath.Join(project, f), ContentHash(b)}) {
			t.Errorf("project file %s is not recorded with its hash: %v", f, r.Files)
		}
	}
	if containsPath(r.Files, filepath.Join(home, ".npmrc")) {
		t.Errorf("the user's .npmrc is recorded as a project file: %v", r.Files)
	}
}

func containsFile(files []ToolchainFile, f ToolchainFile) bool {
	for _, g := range files {
		if g == f {
			return true
		}
	}
	return false
}

func containsPath(files []ToolchainFile, path string) bool {
	for _, g := range files {
		if g.Path == path {
			return true
		}
	}
	return false
}

func TestNpmDefault(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	// Nothing configured: npm's own definitions file names the default,
	// found from the npm symbolic link on PATH.
	r := readWith(t, "node", "npm", project, project, home, map[string]string{})
	wantHosts(t, hosts(r, project), "default registry.example.test <sys>/usr/lib/node_modules/npm/node_modules/@npmcli/config/lib/definitions/definitions.js registry default")
	if len(r.Warnings) > 0 {
		t.Errorf("warnings: %v", r.Warnings)
	}
	// The environment's registry wins; the variable is case-insensitive.
	r = readWith(t, "node", "npx", project, project, home, map[string]string{"NPM_CONFIG_REGISTRY": "https://env.example.test/"})
	wantHosts(t, hosts(r, project), "user env.example.test NPM_CONFIG_REGISTRY")
	// npm_config_userconfig replaces ~/.npmrc; the global npmrc is found
	// under the node install's prefix.
	writeTestFile(t, filepath.Join(home, "other.npmrc"), "registry=https://userconfig.example.test/\n", 0o644)
	writeTestFile(t, filepath.Join(home, ".npmrc"), "registry=https://ignored.example.test/\n", 0o644)
	r = readWith(t, "node", "npm", project, project, home, map[string]string{"npm_config_userconfig": filepath.Join(home, "other.npmrc"), "npm_config_globalconfig": filepath.Join(home, "global.npmrc")})
	wantHosts(t, hosts(r, project), "user userconfig.example.test "+filepath.Join(home, "other.npmrc")+" registry")

	// No npm on PATH: nothing is allowed and the warning says how to set it.
	r = readWith(t, "node", "npm", project, project, t.TempDir(), map[string]string{"PATH": t.TempDir()})
	if len(r.Hosts) != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "npm_config_registry") {
		t.Errorf("without npm: hosts %v, warnings %q; want none and one naming npm_config_registry", r.Hosts, r.Warnings)
	}
}

// An npm on a PATH entry inside the project (node_modules/.bin) is the
// project's: its "defaults" are not read.
func TestNpmDefaultNotFromProject(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	bin := filepath.Join(project, "node_modules/.bin")
	writeTestFile(t, filepath.Join(project, "node_modules/npm/node_modules/@npmcli/config/lib/definitions/definitions.js"),
		"registry: new Definition('registry', { default: 'http://169.254.169.254/' })\n", 0o644)
	writeTestFile(t, filepath.Join(project, "node_modules/npm/bin/npm-cli.js"), "", 0o755)
	os.MkdirAll(bin, 0o755)
	os.Symlink("../npm/bin/npm-cli.js", filepath.Join(bin, "npm"))
	r := readWith(t, "node", "npm", project, project, home, map[string]string{"PATH": bin + ":relative/bin"})
	if len(r.Hosts) != 0 {
		t.Errorf("an npm inside the project named the default: %v", r.Hosts)
	}
}

// A FIFO planted as .npmrc is skipped, not waited on.
func TestRegistriesSkipFifo(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(project, ".npmrc"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan *Registries)
	go func() { done <- readWith(t, "node", "npm", project, project, home, map[string]string{}) }()
	select {
	case r := <-done:
		if len(r.Files) != 0 {
			t.Errorf("the FIFO was read as a file: %v", r.Files)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("reading registries hangs on a FIFO .npmrc")
	}
}

func TestGoRegistries(t *testing.T) {
	project, home := toolchainsDir(t)
	// GOPROXY from the user's go env file, GOSUMDB from $GOROOT/go.env,
	// GOROOT found from the go command on PATH.
	r := readWith(t, "go", "go", project, project, home, map[string]string{})
	wantHosts(t, hosts(r, project),
		"user goproxy-user.example.test "+home+"/.config/go/env GOPROXY",
		"default sumdb.example.test <sys>/usr/local/go/go.env GOSUMDB",
	)
	// The environment wins over both files; GOSUMDB with a URL names that
	// URL's host; GOENV=off reads no user file.
	r = readWith(t, "go", "go", project, project, home, map[string]string{
		"GOPROXY": "https://a.example.test|https://b.example.test:8443,off", "GOSUMDB": "sum.example.test+key https://sumurl.example.test", "GOENV": "off"})
	wantHosts(t, hosts(r, project),
		"user a.example.test GOPROXY", "user b.example.test:8443 GOPROXY", "user sumurl.example.test GOSUMDB")
	// GOROOT from the environment wins over the go command on PATH;
	// GOSUMDB=off names no host and needs no warning.
	goroot := t.TempDir()
	writeTestFile(t, filepath.Join(goroot, "go.env"), "GOSUMDB=off\n", 0o644)
	r = readWith(t, "go", "go", project, project, home, map[string]string{"GOROOT": goroot})
	wantHosts(t, hosts(r, project), "user goproxy-user.example.test "+home+"/.config/go/env GOPROXY")
	if len(r.Warnings) > 0 {
		t.Errorf("warnings: %v", r.Warnings)
	}
	r = readWith(t, "go", "go", project, project, t.TempDir(), map[string]string{"PATH": t.TempDir()})
	if len(r.Hosts) != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "set GOPROXY") {
		t.Errorf("without go: hosts %v, warnings %q; want none and one naming GOPROXY", r.Hosts, r.Warnings)
	}
}

func TestGoEnvInProject(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	writeTestFile(t, filepath.Join(project, "go.env"), "GOPROXY=https://proj-proxy.example.test\nGOFLAGS=-toolexec=/abs/evil\n", 0o644)
	r := readWith(t, "go", "go", project, project, home, map[string]string{"GOENV": "go.env"})
	wantHosts(t, hosts(r, project),
		"project proj-proxy.example.test go.env GOPROXY", "default sumdb.example.test <sys>/usr/local/go/go.env GOSUMDB")
}

func TestPythonRegistries(t *testing.T) {
	project, home := toolchainsDir(t)
	r := readWith(t, "python", "python3", project, project, home, map[string]string{
		"PIP_EXTRA_INDEX_URL": "https://more.example.test:8443/simple https://more2.example.test/simple",
		"UV_INDEX":            "corp=https://uv-env.example.test/simple",
	})
	wantHosts(t, hosts(r, project),
		"user more.example.test:8443 PIP_EXTRA_INDEX_URL",
		"user more2.example.test PIP_EXTRA_INDEX_URL",
		"user uv-env.example.test UV_INDEX",
		"user pip-user.example.test "+home+"/.config/pip/pip.conf index-url",
		"user pip-extra1.example.test "+home+"/.config/pip/pip.conf extra-index-url",
		"user pip-extra2.example.test "+home+"/.config/pip/pip.conf extra-index-url",
		"user uv-user.example.test "+home+"/.config/uv/uv.toml extra-index-url",
		"project uv-index.example.test uv.toml index-url",
		"project uv-extra.example.test uv.toml extra-index-url",
		"project uv-extra2.example.test uv.toml extra-index-url",
		"project uv-corp.example.test uv.toml index.url",
		"project pyproject-index.example.test pyproject.toml tool.uv.index-url",
		"project pyproject-torch.example.test pyproject.toml tool.uv.index.url",
	)
}

func TestPipDefault(t *testing.T) {
	project, home := t.TempDir(), t.TempDir()
	// Nothing configured: the PyPI literal of the system's pip, not its
	// TestPyPI.
	r := readWith(t, "python", "pip", project, project, home, map[string]string{})
	pipPy := "<sys>/usr/lib/python3/dist-packages/pip/_internal/models/index.py"
	wantHosts(t, hosts(r, project), "default index.example.test "+pipPy+" PyPI", "default files.example.test "+pipPy+" PyPI file_storage_domain")
	// A virtualenv inside the project is the project's; its index-url
	// counts as configured, so pip's default is not added.
	venv := filepath.Join(project, ".venv")
	writeTestFile(t, filepath.Join(venv, "pip.conf"), "[install]\nindex_url: https://venv.example.test/simple\n", 0o644)
	r = readWith(t, "python", "pip", project, project, home, map[string]string{"VIRTUAL_ENV": venv})
	wantHosts(t, hosts(r, project), "project venv.example.test .venv/pip.conf index_url")
	// PIP_CONFIG_FILE=/dev/null reads no file at all.
	r = readWith(t, "python", "pip", project, project, home, map[string]string{"VIRTUAL_ENV": venv, "PIP_CONFIG_FILE": os.DevNull, "PIP_INDEX_URL": "https://x.example.test/"})
	wantHosts(t, hosts(r, project), "user x.example.test PIP_INDEX_URL")
	// No pip installed in the system's directories: none, and a warning.
	rd := newRegReader(project, project, home, func(string) string { return "" })
	rd.sys = t.TempDir()
	rd.read("python", "pip")
	if len(rd.out.Hosts) != 0 || len(rd.out.Warnings) != 1 || !strings.Contains(rd.out.Warnings[0], "PIP_INDEX_URL") {
		t.Errorf("without pip: hosts %v, warnings %q; want none and one naming PIP_INDEX_URL", rd.out.Hosts, rd.out.Warnings)
	}
}

func TestCargoRegistries(t *testing.T) {
	project, home := toolchainsDir(t)
	r := readWith(t, "rust", "cargo", project, project, home, map[string]string{})
	wantHosts(t, hosts(r, project),
		"project cargo-corp.example.test .cargo/config.toml registries.corp.index",
		"project cargo-git.example.test .cargo/config.toml registries.my-git.index",
		"project cargo-mirror.example.test .cargo/config.toml source.mirror.registry",
		"user cargo-home.example.test "+home+"/.cargo/config.toml source.corp-home.registry",
	)
	if len(r.Warnings) > 0 { // crates-io is replaced by a mirror
		t.Errorf("warnings: %v", r.Warnings)
	}
	// No replacement: cargo's built-in default is not guessed, and cargo is
	// told how to allow it.
	r = readWith(t, "rust", "cargo", t.TempDir(), t.TempDir(), t.TempDir(), map[string]string{})
	if len(r.Hosts) != 0 || len(r.Warnings) != 1 || !strings.Contains(r.Warnings[0], "--allow-domain") {
		t.Errorf("cargo without config: hosts %v, warnings %q", r.Hosts, r.Warnings)
	}
	if r = readWith(t, "rust", "rustc", t.TempDir(), t.TempDir(), t.TempDir(), map[string]string{}); len(r.Warnings) != 0 {
		t.Errorf("rustc fetches nothing, yet warns: %q", r.Warnings)
	}
}

func TestToolchainOf(t *testing.T) {
	for cmd, want := range map[string]string{"npm": "node", "/usr/bin/yarn": "node", "bunx": "node", "pnpm": "node", "uv": "python", "python3": "python", "go": "go", "cargo": "rust", "sh": "", "git": ""} {
		if got := toolchainOf([]string{cmd}); got != want {
			t.Errorf("toolchainOf(%s) = %q, want %q", cmd, got, want)
		}
	}
}

func TestToolchainFiles(t *testing.T) {
	project, home := toolchainsDir(t)
	got := ToolchainFiles(project, filepath.Join(project, "sub"), home, func(string) string { return "" }).Files
	var names []string
	for _, f := range got {
		b, _ := os.ReadFile(f.Path)
		if f.Hash != ContentHash(b) {
			t.Errorf("%s: hash %s is not of its content", f.Path, f.Hash)
		}
		names = append(names, strings.TrimPrefix(f.Path, project+"/"))
	}
	sort.Strings(names)
	want := []string{".cargo/config.toml", ".npmrc", ".yarnrc.yml", "bunfig.toml", "pyproject.toml", "sub/.npmrc", "uv.toml"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("toolchain files %v, want %v", names, want)
	}
}

func TestRegistriesDecide(t *testing.T) {
	home := t.TempDir()
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return filepath.Join(home, ".config")
		}
		return ""
	}
	npmrc, venv := "/p/.npmrc", "/p/.venv/pip.conf"
	regs := &Registries{
		Hosts: []Registry{
			{Host: "127.0.0.1:4873", Setting: "~/.npmrc registry", Origin: OriginUser},
			{Host: "mirror.example.test", Setting: "npm_config_registry", Origin: OriginUser},
			{Host: "registry.example.test", Setting: ".npmrc registry", Origin: OriginProject, File: npmrc},
			{Host: "169.254.169.254", Setting: ".npmrc @a:registry", Origin: OriginProject, File: npmrc},
			{Host: "[::1]:80", Setting: ".npmrc @b:registry", Origin: OriginProject, File: npmrc},
			{Host: "127.1", Setting: ".npmrc @c:registry", Origin: OriginProject, File: npmrc},
			{Host: "localhost:4873", Setting: ".npmrc @d:registry", Origin: OriginProject, File: npmrc},
			{Host: "10.0.0.5:8080", Setting: ".npmrc @e:registry", Origin: OriginProject, File: npmrc},
			{Host: "127.0.0.1:4873", Setting: ".npmrc @f:registry", Origin: OriginProject, File: npmrc},
			{Host: "mirror.example.test", Setting: ".venv/pip.conf index-url", Origin: OriginProject, File: venv},
			{Host: "*.example.test", Setting: ".npmrc @g:registry", Origin: OriginProject, File: npmrc},
			{Host: "10.9.9.9", Setting: "npm registry default", Origin: OriginDefault},
			{Host: "files.example.test", Setting: "PyPI file_storage_domain", Origin: OriginDefault},
		},
		Files: []ToolchainFile{{npmrc, "h1"}, {venv, "h2"}},
	}
	d := regs.Decide([]string{"10.0.0.5:8080"}, home, getenv)
	want := []string{"127.0.0.1:4873", "mirror.example.test", "registry.example.test", "10.0.0.5:8080", "files.example.test"}
	if !reflect.DeepEqual(d.Allow, want) {
		t.Errorf("allow %v, want %v", d.Allow, want)
	}
	wantW := []string{".npmrc registry registry.example.test (project toolchain config)"}
	if !reflect.DeepEqual(d.Widening, wantW) {
		t.Errorf("widening %q, want %q", d.Widening, wantW)
	}
	if len(d.Untrusted) != 1 || d.Untrusted[0].Path != npmrc || !reflect.DeepEqual(d.Untrusted[0].Widening, wantW) {
		t.Errorf("untrusted %+v, want %s alone", d.Untrusted, npmrc)
	}
	for _, h := range []string{"169.254.169.254", "[::1]:80", "127.1", "localhost:4873", "*.example.test", "10.9.9.9"} {
		found := false
		for _, w := range d.Warnings {
			found = found || strings.Contains(w, h)
		}
		if !found {
			t.Errorf("no warning names the dropped %s: %q", h, d.Warnings)
		}
	}
	// Trusted as it is: nothing untrusted; changed: untrusted again.
	if err := Trust(npmrc, "h1", home, getenv); err != nil {
		t.Fatal(err)
	}
	if d = regs.Decide(nil, home, getenv); len(d.Untrusted) != 0 || len(d.Widening) != 1 {
		t.Errorf("after trust: untrusted %v, widening %v", d.Untrusted, d.Widening)
	}
	regs.Files[0].Hash = "h1-changed"
	if d = regs.Decide(nil, home, getenv); len(d.Untrusted) != 1 {
		t.Errorf("after a change: untrusted %v, want the .npmrc", d.Untrusted)
	}
}

// The readers learn registries from files only. A dependency policy: no
// file of the policy package imports os/exec or spawns a process; only
// the Linux apply does.
func TestRegistriesRunNothing(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		ast, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range ast.Imports {
			if imp.Path.Value == `"os/exec"` {
				t.Errorf("%s imports os/exec: planning must run nothing on the host", f)
			}
		}
		src, _ := os.ReadFile(f)
		for _, call := range []string{"exec.Command", "os.StartProcess", "syscall.Exec(", "ForkExec("} {
			if strings.Contains(string(src), call) {
				t.Errorf("%s calls %s: planning must run nothing on the host", f, call)
			}
		}
	}
	if len(files) < 10 {
		t.Fatalf("found only %d files to check; run from the package directory", len(files))
	}
}

func TestParseTOML(t *testing.T) {
	doc := `
a = "x" # c
"q.k" = 'lit'
arr = ["1", # one
  "2"]
num = 3
[t."sub.x"]
k = """multi
line"""
inl = { u = "v", n = 1, deep = { w = "z" } }
[[list]]
url = "e\"scaped"
`
	var got []string
	for _, e := range parseTOML([]byte(doc)) {
		got = append(got, strings.Join(e.path, "|")+"="+e.value)
	}
	want := []string{"a=x", "q.k=lit", "arr=1", "arr=2", "t|sub.x|k=multi\nline", "t|sub.x|inl|u=v", "t|sub.x|inl|deep|w=z", `list|url=e"scaped`}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseTOML:\n got %q\nwant %q", got, want)
	}
}

func TestParseIniAndYAML(t *testing.T) {
	ini := parseIni([]byte("[global]\nindex-url = https://a/\nextra-index-url =\n  https://b/\n  https://c/\n; comment\nx: y\n"), false)
	if len(ini) != 3 || ini[1].value != "https://b/\nhttps://c/" || ini[2].path[1] != "x" || ini[0].path[0] != "global" {
		t.Errorf("pip ini: %+v", ini)
	}
	npm := parseIni([]byte("registry = 'https://a/' ; c\n  @s:registry=https://b/ # c\n"), true)
	if len(npm) != 2 || npm[0].value != "https://a/" || npm[1].path[1] != "@s:registry" || npm[1].value != "https://b/" {
		t.Errorf("npm ini: %+v", npm)
	}
	y := parseYAML([]byte("a: 1\nb:\n  c: \"x:y\" # c\n  d:\n    e: f\ng: h\n"))
	var got []string
	for _, e := range y {
		got = append(got, strings.Join(e.path, ".")+"="+e.value)
	}
	if want := []string{"a=1", "b.c=x:y", "b.d.e=f", "g=h"}; !reflect.DeepEqual(got, want) {
		t.Errorf("yaml: got %q, want %q", got, want)
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{
		"https://a.example.test/":             "a.example.test",
		"http://a.example.test:4873/x":        "a.example.test:4873",
		"sparse+https://c.example.test/index": "c.example.test",
		"registry+https://d.example.test/":    "d.example.test",
		"sum.example.test":                    "sum.example.test",
		"http://[::1]:80/":                    "[::1]:80",
		"file:///srv/proxy":                   "",
		"":                                    "",
	} {
		if got := hostOf(in); got != want {
			t.Errorf("hostOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// FuzzToolchainFormats: the hand parsers take any bytes a cloned project
// may hold without panicking, and every host they yield is one hostOf
// accepts.
func FuzzToolchainFormats(f *testing.F) {
	for _, name := range []string{"project/.npmrc", "project/uv.toml", "project/pyproject.toml", "project/bunfig.toml", "project/.yarnrc.yml", "project/.cargo/config.toml", "go.env"} {
		b, err := os.ReadFile(filepath.Join("testdata/toolchains", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("a = [\"x\", { b = '''\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var all []confEntry
		all = append(all, parseIni(data, true)...)
		all = append(all, parseIni(data, false)...)
		all = append(all, parseTOML(data)...)
		all = append(all, parseYAML(data)...)
		for k, v := range parseEnvFile(data) {
			all = append(all, confEntry{[]string{k}, v})
		}
		for _, e := range all {
			if h := hostOf(e.value); h != "" && localAddress(h) == "" {
				if _, port := splitHost(h); port < 1 || port > 65535 {
					t.Errorf("hostOf(%q) = %q: a port out of range passes as a host", e.value, h)
				}
			}
		}
	})
}

// realTempDir is a temporary directory with its symbolic links resolved,
// as jail resolves the working directory.
func realTempDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRegistriesEnvPathThroughSymlink: a path the environment names that
// leads into the project through a symbolic link (the user cd'd into a
// link to the project, so $PWD/.venv is spelled through it) is the
// project's file: its host widens and needs trust, and trust records its
// real path, the one `jail trust` in the real directory records.
func TestRegistriesEnvPathThroughSymlink(t *testing.T) {
	base := realTempDir(t)
	p, home := filepath.Join(base, "p6"), filepath.Join(base, "home")
	lnk := filepath.Join(base, "lnk")
	if err := os.Symlink(p, lnk); err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, filepath.Join(p, ".venv/pip.conf"), "[global]\nindex-url=https://evil-index.example.com/simple\n", 0o644)
	writeTestFile(t, filepath.Join(p, "conf/uv/uv.toml"), "index-url = \"https://evil-uv.example.com/simple\"\n", 0o644)
	writeTestFile(t, filepath.Join(p, "conf/go/env"), "GOPROXY=https://evil-go.example.com\nGOSUMDB=off\n", 0o644)
	writeTestFile(t, filepath.Join(p, "conf/npmrc"), "registry=https://evil-npm.example.com/\n", 0o644)
	writeTestFile(t, filepath.Join(p, "cargo/config.toml"), "[registries.x]\nindex = \"sparse+https://evil-cargo.example.com/\"\n", 0o644)
	cases := []struct {
		toolchain, command string
		env                map[string]string
		host, file         string
	}{
		{"python", "pip", map[string]string{"VIRTUAL_ENV": lnk + "/.venv"}, "evil-index.example.com", ".venv/pip.conf"},
		{"python", "pip", map[string]string{"VIRTUAL_ENV": base + "/home/../lnk/./.venv"}, "evil-index.example.com", ".venv/pip.conf"},
		{"python", "pip", map[string]string{"PIP_CONFIG_FILE": lnk + "/.venv/pip.conf"}, "evil-index.example.com", ".venv/pip.conf"},
		{"python", "uv", map[string]string{"UV_CONFIG_FILE": lnk + "/conf/uv/uv.toml"}, "evil-uv.example.com", "conf/uv/uv.toml"},
		{"python", "uv", map[string]string{"XDG_CONFIG_HOME": lnk + "/conf"}, "evil-uv.example.com", "conf/uv/uv.toml"},
		{"go", "go", map[string]string{"GOENV": lnk + "/conf/go/env"}, "evil-go.example.com", "conf/go/env"},
		{"go", "go", map[string]string{"XDG_CONFIG_HOME": lnk + "/conf"}, "evil-go.example.com", "conf/go/env"},
		{"node", "npm", map[string]string{"npm_config_userconfig": lnk + "/conf/npmrc"}, "evil-npm.example.com", "conf/npmrc"},
		{"node", "npm", map[string]string{"npm_config_globalconfig": lnk + "/conf/npmrc"}, "evil-npm.example.com", "conf/npmrc"},
		{"rust", "cargo", map[string]string{"CARGO_HOME": lnk + "/cargo"}, "evil-cargo.example.com", "cargo/config.toml"},
	}
	for _, c := range cases {
		r := newRegReader(p, p, home, func(k string) string { return c.env[k] })
		r.read(c.toolchain, c.command)
		real := filepath.Join(p, c.file)
		found := false
		for _, h := range r.out.Hosts {
			if h.Host != c.host {
				continue
			}
			found = true
			if h.Origin != OriginProject || h.File != real {
				t.Errorf("%v: %s is %s from %q, want the project's %s", c.env, c.host, h.Origin, h.File, real)
			}
		}
		if !found {
			t.Errorf("%v: %s not read: %+v", c.env, c.host, r.out.Hosts)
		}
		if !containsPath(r.out.Files, real) {
			t.Errorf("%v: %s is not among the project files trust records: %v", c.env, real, r.out.Files)
		}
		d := r.out.Decide(nil, home, func(string) string { return "" })
		if len(d.Untrusted) != 1 || d.Untrusted[0].Path != real {
			t.Errorf("%v: untrusted %+v, want %s", c.env, d.Untrusted, real)
		}
	}
	// The longest existing prefix decides for a path that does not exist
	// yet: a PATH entry through the link is the project's and skipped.
	r := newRegReader(p, p, home, func(string) string { return "" })
	if !r.inProject(lnk+"/not/yet") || r.inProject(home+"/x") {
		t.Errorf("inProject through the link %v, outside %v", r.inProject(lnk+"/not/yet"), r.inProject(home+"/x"))
	}
}

// hasControl reports a byte or rune a terminal would act on or that
// reorders what is shown: C0 controls, DEL, C1 controls, and Unicode's
// bidirectional and other format characters.
func hasControl(s string) bool {
	for _, c := range s {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || (c >= 0x202a && c <= 0x202e) ||
			(c >= 0x2066 && c <= 0x2069) || c == 0x200e || c == 0x200f || c == 0x061c {
			return true
		}
	}
	return false
}

// TestRegistriesShownQuoted: what a planted toolchain file says (its keys,
// its hosts, the names of the directories it sits in) reaches the trust
// prompt and the warnings quoted: no terminal escape, control character
// or bidirectional override gets through to rewrite the screen, and a
// long key is clipped.
func TestRegistriesShownQuoted(t *testing.T) {
	base := realTempDir(t)
	p, home := filepath.Join(base, "p"), filepath.Join(base, "home")
	esc := "\x1b[2K\x1b[1A\x1b[2K\r  .npmrc registry registry.example.test (your ~/.npmrc)\x1b[8m"
	sub := filepath.Join(p, "d\x1b]0;t\x07\u202e")
	writeTestFile(t, filepath.Join(p, ".npmrc"), "@x"+esc+":registry=https://evil.example.com/\n"+
		"@y\u202e\u2066"+strings.Repeat("k", 200)+":registry=https://evil2.example.com/\n"+
		"@z\x7f:registry=http://127.0.0.1\u202e:4873/\n"+
		"@w\x01:registry=https://10.0.0.1/\n"+
		"@v:registry=https://evil\u202e\u2067.example.com/\n", 0o644)
	writeTestFile(t, filepath.Join(sub, ".npmrc"), "registry=https://sub.example.com/\n", 0o644)
	writeTestFile(t, filepath.Join(sub, "pyproject.toml"), "[tool.uv]\n\"index-url\u202e\" = \"https://uv.example.com/\"\nindex-url = \"https://uv\x1b.example.com/\"\n", 0o644)
	getenv := func(string) string { return "" }
	regs := ToolchainFiles(p, sub, home, getenv)
	d := regs.Decide(nil, home, getenv)
	var shownText []string
	shownText = append(shownText, d.Widening...)
	shownText = append(shownText, d.Warnings...)
	for _, u := range d.Untrusted {
		shownText = append(shownText, u.Widening...)
	}
	for _, w := range regs.FileWidening() {
		shownText = append(shownText, w...)
	}
	named := map[string]bool{}
	for _, s := range shownText {
		if hasControl(s) {
			t.Errorf("shown raw: %q", s)
		}
		if len(s) > 300 {
			t.Errorf("not clipped (%d bytes): %q", len(s), s)
		}
		for _, h := range []string{"evil.example.com", "evil2.example.com", "sub.example.com", "10.0.0.1"} {
			named[h] = named[h] || strings.Contains(s, h)
		}
	}
	for _, h := range []string{"evil.example.com", "evil2.example.com", "sub.example.com", "10.0.0.1"} {
		if !named[h] {
			t.Errorf("%s is not shown at all: %q", h, shownText)
		}
	}
	if len(d.Widening) < 3 {
		t.Errorf("the planted registries do not widen: %q", d.Widening)
	}
}
