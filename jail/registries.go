package jail

import (
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/jailsh/jail/proxy"
)

// Registry hosts come from the toolchains' own configuration, read from
// their files: nothing is executed to find them, since a program run on
// the host in the project directory would run whatever the project
// planted there (a pip package, sitecustomize.py, an .npmrc
// node-options). Each host records where it was named, because a file
// in the project widens the jail as the project's jail.json would.

// Where a registry host was named.
const (
	// OriginUser is the user's environment or the user's or the system's
	// own configuration files, trusted as the user's word.
	OriginUser = "user"
	// OriginDefault is a toolchain's built-in default, read from the
	// toolchain's installed files.
	OriginDefault = "default"
	// OriginProject is a file inside the project: it needs the user's
	// trust, and it may not name local addresses.
	OriginProject = "project"
)

// Registry is one package registry host and where it was configured.
type Registry struct {
	Host    string // host[:port], as network.allow takes it
	Setting string // the setting that named it: "npm_config_registry", ".npmrc registry"
	Origin  string // OriginUser, OriginDefault or OriginProject
	File    string // the file that named it ("" for the environment)
}

// ToolchainFile is a project file read for registry settings, with the
// ContentHash of the bytes that were read.
type ToolchainFile struct{ Path, Hash string }

// Registries is what reading a command's toolchain configuration found.
type Registries struct {
	Hosts    []Registry
	Files    []ToolchainFile // project files read, whether or not they named a host
	Warnings []string
}

// toolchainOf names the toolchain whose package registries a command
// needs: the commands that pick the node, go, python and rust profiles.
func toolchainOf(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	switch t := commandProfiles[filepath.Base(argv[0])]; t {
	case "node", "go", "python", "rust":
		return t
	}
	return ""
}

// ReadRegistries returns the registry hosts a command's toolchain is
// configured to use, read from the environment and the toolchain's files
// (project files in cwd and each directory up to the project root);
// never a host name written into jail, and nothing executed.
func ReadRegistries(argv []string, project, cwd, home string, getenv func(string) string) *Registries {
	r := newRegReader(project, cwd, home, getenv)
	if len(argv) > 0 {
		r.read(toolchainOf(argv), filepath.Base(argv[0]))
	}
	return r.out
}

// ToolchainFiles returns what every toolchain's configuration names,
// with the project's toolchain files that can name registries as they are
// now: what `jail trust` shows and records.
func ToolchainFiles(project, cwd, home string, getenv func(string) string) *Registries {
	r := newRegReader(project, cwd, home, getenv)
	for _, t := range []string{"node", "go", "python", "rust"} {
		r.read(t, "")
	}
	return r.out
}

// regReader reads one toolchain's registry settings into out.
type regReader struct {
	project, cwd, home string
	// root is the project with its symbolic links resolved.
	root   string
	getenv func(string) string
	// sys prefixes the system's fixed paths (/etc, /usr/lib): "" but in
	// tests.
	sys string
	out *Registries
	// places records where each file read really was.
	places map[string]place
}

// place is where a configuration file really is: a path the environment
// names (VIRTUAL_ENV, PIP_CONFIG_FILE, GOENV, …) may lead into the
// project through a symbolic link, and a file there is the project's.
type place struct {
	path    string // the path trust records: the real one when it is in the project
	project bool
}

func newRegReader(project, cwd, home string, getenv func(string) string) *regReader {
	return &regReader{project: project, root: resolveExisting(project), cwd: cwd, home: home, getenv: getenv,
		out: &Registries{}, places: map[string]place{}}
}

// read reads a toolchain's settings; command is the command run ("cargo"
// is told how to allow cargo's built-in default).
func (r *regReader) read(toolchain, command string) {
	switch toolchain {
	case "node":
		r.npm()
		r.yarn()
		r.bun()
	case "go":
		r.golang()
	case "python":
		r.pip()
		r.uv()
	case "rust":
		r.cargo(command == "cargo")
	}
}

// maxConfig bounds what is read of one configuration file.
const maxConfig = 1 << 20

// file returns a regular file's bytes (nil when it is missing or not a
// regular file: a FIFO planted as .npmrc must not hang jail), recording a
// project file with its hash.
func (r *regReader) file(path string) []byte {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxConfig))
	if err != nil {
		return nil
	}
	pl := r.locate(path, openedPath(f))
	r.places[path] = pl
	if pl.project {
		for _, t := range r.out.Files {
			if t.Path == pl.path {
				return b
			}
		}
		r.out.Files = append(r.out.Files, ToolchainFile{pl.path, ContentHash(b)})
	}
	return b
}

// openedPath is the real path of the file f opened, as the kernel has it:
// a symbolic link changed after the open does not move it. "" when the
// kernel does not say.
func openedPath(f *os.File) string {
	p, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(int(f.Fd())))
	if err != nil || !filepath.IsAbs(p) {
		return ""
	}
	return p
}

// locate decides whether path (whose real path is real, "" when unknown)
// is the project's: it is when its real path is inside the resolved
// project root, or when it is written inside the project.
func (r *regReader) locate(path, real string) place {
	if r.project == "" {
		return place{path: path}
	}
	if real == "" {
		real = resolveExisting(path)
	}
	switch clean := filepath.Clean(path); {
	case Under(real, r.root):
		return place{real, true}
	case Under(clean, r.project) || Under(clean, r.root):
		return place{clean, true}
	}
	return place{path: path}
}

// placeOf is where path is: as it was when read, else as it is now.
func (r *regReader) placeOf(path string) place {
	if pl, ok := r.places[path]; ok {
		return pl
	}
	return r.locate(path, "")
}

func (r *regReader) inProject(path string) bool {
	return r.placeOf(path).project
}

// origin is where a setting read from path comes from: the project when
// the file is inside it, else fallback.
func (r *regReader) origin(path, fallback string) string {
	if r.inProject(path) {
		return OriginProject
	}
	return fallback
}

// name is how a file is shown, quoted: relative to the project when
// inside it.
func (r *regReader) name(path string) string {
	if pl := r.placeOf(path); pl.project {
		if Under(pl.path, r.root) {
			return shown(displayPath(pl.path, r.root))
		}
		return shown(displayPath(pl.path, r.project))
	}
	return shown(path)
}

// add records the host of a registry URL; a value that names no host
// (file://, a local path) adds nothing.
func (r *regReader) add(rawURL, setting, origin, file string) {
	if h := hostOf(rawURL); h != "" {
		r.out.Hosts = append(r.out.Hosts, Registry{Host: h, Setting: setting, Origin: origin, File: file})
	}
}

// addFrom records a URL read from a file's key; the file's name and the
// key are quoted, as a stranger may have written them.
func (r *regReader) addFrom(rawURL, path, key, fallback string) {
	r.add(rawURL, r.name(path)+" "+shown(clip(key)), r.origin(path, fallback), r.placeOf(path).path)
}

func (r *regReader) warn(format string, args ...any) {
	r.out.Warnings = append(r.out.Warnings, fmt.Sprintf(format, args...))
}

// abs makes a path named by the environment absolute against cwd.
func (r *regReader) abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(r.cwd, p)
}

// projectDirs are the directories project-level config is read from:
// cwd, then each parent up to the project root.
func (r *regReader) projectDirs() []string {
	var dirs []string
	for d := r.cwd; ; d = filepath.Dir(d) {
		dirs = append(dirs, d)
		if d == r.project || !Under(d, r.project) || d == filepath.Dir(d) {
			return dirs
		}
	}
}

// inDirs is name in each of dirs.
func inDirs(dirs []string, name string) []string {
	out := make([]string, len(dirs))
	for i, d := range dirs {
		out[i] = filepath.Join(d, name)
	}
	return out
}

// configHome is XDG_CONFIG_HOME, else ~/.config.
func (r *regReader) configHome() string {
	if x := r.getenv("XDG_CONFIG_HOME"); filepath.IsAbs(x) {
		return x
	}
	return filepath.Join(r.home, ".config")
}

// lookPath finds a command on PATH the way a shell would, skipping
// relative entries and entries inside the project, and resolves its
// symbolic links; "" when there is none. It only looks: nothing runs.
func (r *regReader) lookPath(name string) string {
	for _, dir := range filepath.SplitList(r.getenv("PATH")) {
		if !filepath.IsAbs(dir) || r.inProject(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue
		}
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return real
		}
	}
	return ""
}

var envRef = regexp.MustCompile(`\$\{([^}]+)\}`)

// expand replaces ${NAME} with the variable's value, as npm and yarn do in
// their config files.
func (r *regReader) expand(v string) string {
	return envRef.ReplaceAllStringFunc(v, func(m string) string { return r.getenv(m[2 : len(m)-1]) })
}

// npmEnv is an npm setting from the environment: npm_config_NAME in
// either case.
func (r *regReader) npmEnv(name string) (value, variable string) {
	for _, k := range []string{"npm_config_" + name, "NPM_CONFIG_" + strings.ToUpper(name)} {
		if v := r.getenv(k); v != "" {
			return v, k
		}
	}
	return "", ""
}

// npm reads npm's registry and @scope:registry settings: the environment,
// then the project's, the user's, the global and npm's built-in npmrc;
// npm's own default when none sets the registry.
func (r *regReader) npm() {
	haveDefault := false
	if v, k := r.npmEnv("registry"); v != "" {
		r.add(v, k, OriginUser, "")
		haveDefault = true
	}
	npmDir := r.npmDir()
	rcs := inDirs(r.projectDirs(), ".npmrc")
	user := filepath.Join(r.home, ".npmrc")
	if v, _ := r.npmEnv("userconfig"); v != "" {
		user = r.abs(v)
	}
	rcs = append(rcs, user)
	if v, _ := r.npmEnv("globalconfig"); v != "" {
		rcs = append(rcs, r.abs(v))
	} else if prefix := r.npmPrefix(npmDir); prefix != "" {
		rcs = append(rcs, filepath.Join(prefix, "etc", "npmrc"))
	}
	rcs = append(rcs, r.sys+"/etc/npmrc")
	if npmDir != "" {
		rcs = append(rcs, filepath.Join(npmDir, "npmrc"))
	}
	for _, rc := range rcs {
		for _, e := range parseIni(r.file(rc), true) {
			k := e.path[1]
			if k == "registry" {
				haveDefault = true
			}
			if k == "registry" || (strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry")) {
				r.addFrom(r.expand(e.value), rc, k, OriginUser)
			}
		}
	}
	if !haveDefault {
		r.npmDefault(npmDir)
	}
}

// npmDir is the npm package's directory, found from the npm command on
// PATH: its symbolic link leads to <dir>/bin/npm-cli.js.
func (r *regReader) npmDir() string {
	bin := r.lookPath("npm")
	if bin == "" {
		return ""
	}
	return filepath.Dir(filepath.Dir(bin))
}

// npmPrefix is npm's global prefix: npm_config_prefix, PREFIX, else the
// node install's (the directory above the bin/ holding node, or the one
// holding lib/node_modules/npm).
func (r *regReader) npmPrefix(npmDir string) string {
	if v, _ := r.npmEnv("prefix"); v != "" {
		return r.abs(v)
	}
	if v := r.getenv("PREFIX"); filepath.IsAbs(v) {
		return v
	}
	if node := r.lookPath("node"); node != "" {
		return filepath.Dir(filepath.Dir(node))
	}
	if npmDir != "" {
		return filepath.Dir(filepath.Dir(filepath.Dir(npmDir)))
	}
	return ""
}

// npmDefinitions are where npm's versions keep the defaults of its
// settings, under the npm package directory.
var npmDefinitions = []string{
	"node_modules/@npmcli/config/lib/definitions/definitions.js",
	"lib/utils/config/definitions.js",
}

var npmRegistryDefault = regexp.MustCompile(`(?s)^\s*\{[^{]*?\bdefault:\s*['"]([^'"]+)['"]`)

// npmDefault reads the default of npm's registry setting from npm's own
// definitions file; without one it allows none and says how to set it.
func (r *regReader) npmDefault(npmDir string) {
	if npmDir != "" {
		for _, rel := range npmDefinitions {
			path := filepath.Join(npmDir, rel)
			js := string(r.file(path))
			_, def, ok := strings.Cut(js, "new Definition('registry',")
			if !ok {
				_, def, ok = strings.Cut(js, `new Definition("registry",`)
			}
			if m := npmRegistryDefault.FindStringSubmatch(def); ok && m != nil {
				r.add(m[1], r.name(path)+" registry default", OriginDefault, path)
				return
			}
		}
	}
	r.warn("npm's default registry was not found in npm's installed files, so no registry is allowed for npm; set npm_config_registry (or registry= in ~/.npmrc)")
}

// yarn reads Yarn's npmRegistryServer settings (default, publish and per
// scope) from YARN_NPM_REGISTRY_SERVER and .yarnrc.yml files.
func (r *regReader) yarn() {
	if v := r.getenv("YARN_NPM_REGISTRY_SERVER"); v != "" {
		r.add(v, "YARN_NPM_REGISTRY_SERVER", OriginUser, "")
	}
	for _, rc := range append(inDirs(r.projectDirs(), ".yarnrc.yml"), filepath.Join(r.home, ".yarnrc.yml")) {
		for _, e := range parseYAML(r.file(rc)) {
			if e.is("npmRegistryServer") || e.is("npmPublishRegistry") || e.is("npmScopes", "*", "npmRegistryServer") || e.is("npmScopes", "*", "npmPublishRegistry") {
				r.addFrom(r.expand(e.value), rc, strings.Join(e.path, "."), OriginUser)
			}
		}
	}
}

// bun reads Bun's install registry and scopes from BUN_CONFIG_REGISTRY
// and bunfig.toml files.
func (r *regReader) bun() {
	if v := r.getenv("BUN_CONFIG_REGISTRY"); v != "" {
		r.add(v, "BUN_CONFIG_REGISTRY", OriginUser, "")
	}
	rcs := append(inDirs(r.projectDirs(), "bunfig.toml"), filepath.Join(r.home, ".bunfig.toml"), filepath.Join(r.configHome(), ".bunfig.toml"))
	for _, rc := range rcs {
		for _, e := range parseTOML(r.file(rc)) {
			if e.is("install", "registry") || e.is("install", "registry", "url") || e.is("install", "scopes", "*") || e.is("install", "scopes", "*", "url") {
				r.addFrom(r.expand(e.value), rc, strings.Join(e.path, "."), OriginUser)
			}
		}
	}
}

// goSetting is one Go setting and where it was found.
type goSetting struct{ value, setting, origin, file string }

// golang reads GOPROXY and GOSUMDB as go does: the environment, then the
// GOENV file (go env -w), then $GOROOT/go.env, with GOROOT from the
// environment or from the go command on PATH (<goroot>/bin/go).
func (r *regReader) golang() {
	set := map[string]goSetting{}
	for _, k := range []string{"GOPROXY", "GOSUMDB"} {
		if v := r.getenv(k); v != "" {
			set[k] = goSetting{v, k, OriginUser, ""}
		}
	}
	goenv := r.getenv("GOENV")
	if goenv == "" {
		goenv = filepath.Join(r.configHome(), "go", "env")
	}
	if goenv != "off" {
		r.goEnvFile(set, r.abs(goenv), OriginUser)
	}
	goroot := r.abs(r.getenv("GOROOT"))
	if goroot == "" {
		if bin := r.lookPath("go"); bin != "" {
			goroot = filepath.Dir(filepath.Dir(bin))
		}
	}
	if goroot != "" {
		r.goEnvFile(set, filepath.Join(goroot, "go.env"), OriginDefault)
	}
	if s, ok := set["GOPROXY"]; ok {
		for _, p := range strings.FieldsFunc(s.value, func(c rune) bool { return c == ',' || c == '|' }) {
			if p != "direct" && p != "off" {
				r.add(p, s.setting, s.origin, s.file)
			}
		}
	}
	// GOSUMDB is "name", "name+key" or "name+key url"; the name is its
	// host unless a URL follows.
	if s, ok := set["GOSUMDB"]; ok {
		if f := strings.Fields(s.value); len(f) > 1 {
			r.add(f[1], s.setting, s.origin, s.file)
		} else if len(f) == 1 && f[0] != "off" {
			name, _, _ := strings.Cut(f[0], "+")
			r.add("https://"+name, s.setting, s.origin, s.file)
		}
	}
	if set["GOPROXY"].value == "" || set["GOSUMDB"].value == "" {
		r.warn("Go's GOPROXY or GOSUMDB was found neither in the environment, the GOENV file nor $GOROOT/go.env, so it is not allowed; set GOPROXY and GOSUMDB")
	}
}

// goEnvFile fills the GOPROXY and GOSUMDB the environment left unset
// from a Go env file.
func (r *regReader) goEnvFile(set map[string]goSetting, path, fallback string) {
	m := parseEnvFile(r.file(path))
	for _, k := range []string{"GOPROXY", "GOSUMDB"} {
		if _, ok := set[k]; !ok && m[k] != "" {
			set[k] = goSetting{m[k], r.name(path) + " " + k, r.origin(path, fallback), r.placeOf(path).path}
		}
	}
}

// pip reads pip's indexes: PIP_INDEX_URL, PIP_EXTRA_INDEX_URL and the
// pip.conf files (system, user, the virtualenv's, PIP_CONFIG_FILE); pip's
// own default when none sets the index.
func (r *regReader) pip() {
	configured := false
	if v := r.getenv("PIP_INDEX_URL"); v != "" {
		r.add(v, "PIP_INDEX_URL", OriginUser, "")
		configured = true
	}
	for _, u := range strings.Fields(r.getenv("PIP_EXTRA_INDEX_URL")) {
		r.add(u, "PIP_EXTRA_INDEX_URL", OriginUser, "")
	}
	var confs []string
	conf := r.getenv("PIP_CONFIG_FILE")
	if conf != os.DevNull && conf != "os.devnull" { // pip reads no file then
		confs = []string{r.sys + "/etc/xdg/pip/pip.conf", r.sys + "/etc/pip.conf",
			filepath.Join(r.home, ".pip", "pip.conf"), filepath.Join(r.configHome(), "pip", "pip.conf")}
		if venv := r.abs(r.getenv("VIRTUAL_ENV")); venv != "" {
			confs = append(confs, filepath.Join(venv, "pip.conf"))
		}
		if conf != "" {
			confs = append(confs, r.abs(conf))
		}
	}
	for _, c := range confs {
		for _, e := range parseIni(r.file(c), false) {
			switch k := e.path[1]; k {
			case "index-url", "index_url":
				configured = true
				r.addFrom(e.value, c, k, OriginUser)
			case "extra-index-url", "extra_index_url":
				for _, u := range strings.Fields(e.value) {
					r.addFrom(u, c, k, OriginUser)
				}
			}
		}
	}
	if !configured {
		r.pipDefault()
	}
}

// pipIndexGlobs are where the system's pip is installed: system
// directories only, never the project's or the home's Pythons.
var pipIndexGlobs = []string{
	"/usr/lib/python3*/*-packages/pip/_internal/models/index.py",
	"/usr/local/lib/python3*/*-packages/pip/_internal/models/index.py",
}

var pypiLiteral = regexp.MustCompile(`(?m)^PyPI\s*=\s*PackageIndex\(\s*['"]([^'"]+)['"]\s*,\s*file_storage_domain\s*=\s*['"]([^'"]+)['"]`)

// pipDefault reads pip's default index and the host its files are served
// from out of the PackageIndex literal in pip's installed source, without
// importing or running Python; without one it allows none and says how to
// set it.
func (r *regReader) pipDefault() {
	for _, g := range pipIndexGlobs {
		paths, _ := filepath.Glob(r.sys + g)
		sort.Strings(paths)
		for _, p := range paths {
			if m := pypiLiteral.FindStringSubmatch(string(r.file(p))); m != nil {
				r.add(m[1], r.name(p)+" PyPI", OriginDefault, p)
				r.add("https://"+m[2], r.name(p)+" PyPI file_storage_domain", OriginDefault, p)
				return
			}
		}
	}
	r.warn("pip's default index was not found in the system's pip installation, so no index is allowed for pip; set PIP_INDEX_URL (or index-url in ~/.config/pip/pip.conf)")
}

// uv reads uv's indexes: UV_INDEX_URL, UV_DEFAULT_INDEX, UV_INDEX,
// UV_EXTRA_INDEX_URL, the system's and the user's uv.toml and the
// project's uv.toml and pyproject.toml ([tool.uv]). Its default index is
// pip's, added by pip when no index is configured.
func (r *regReader) uv() {
	for _, k := range []string{"UV_INDEX_URL", "UV_DEFAULT_INDEX", "UV_INDEX", "UV_EXTRA_INDEX_URL"} {
		for _, u := range strings.Fields(r.getenv(k)) {
			if i := strings.IndexByte(u, '='); i >= 0 && !strings.Contains(u[:i], "/") {
				u = u[i+1:] // name=url
			}
			r.add(u, k, OriginUser, "")
		}
	}
	files := []string{r.sys + "/etc/xdg/uv/uv.toml", r.sys + "/etc/uv/uv.toml", filepath.Join(r.configHome(), "uv", "uv.toml")}
	if v := r.getenv("UV_CONFIG_FILE"); v != "" {
		files = append(files, r.abs(v))
	}
	files = append(files, inDirs(r.projectDirs(), "uv.toml")...)
	for _, f := range files {
		r.uvKeys(f, nil)
	}
	for _, f := range inDirs(r.projectDirs(), "pyproject.toml") {
		r.uvKeys(f, []string{"tool", "uv"})
	}
}

// uvKeys reads uv's index keys from a TOML file, under table (tool.uv in
// pyproject.toml).
func (r *regReader) uvKeys(path string, table []string) {
	for _, e := range parseTOML(r.file(path)) {
		if len(e.path) < len(table) || strings.Join(e.path[:len(table)], "\x00") != strings.Join(table, "\x00") {
			continue
		}
		k := confEntry{path: e.path[len(table):]}
		if k.is("index-url") || k.is("extra-index-url") || k.is("index", "url") ||
			k.is("pip", "index-url") || k.is("pip", "extra-index-url") {
			r.addFrom(e.value, path, strings.Join(e.path, "."), OriginUser)
		}
	}
}

// cargo reads cargo's registries and source replacements from the
// project's .cargo/config.toml (cwd up to the project root) and
// $CARGO_HOME's. Cargo's default registry is built into cargo, not written
// in any file: unless a source replaces it, none is allowed, and a cargo
// command is told how to allow one.
func (r *regReader) cargo(warn bool) {
	cargoHome := r.abs(r.getenv("CARGO_HOME"))
	if cargoHome == "" {
		cargoHome = filepath.Join(r.home, ".cargo")
	}
	dirs := append(inDirs(r.projectDirs(), ".cargo"), cargoHome)
	replaced := false
	for _, d := range dirs {
		for _, f := range []string{filepath.Join(d, "config.toml"), filepath.Join(d, "config")} {
			for _, e := range parseTOML(r.file(f)) {
				switch {
				case e.is("registries", "*", "index"), e.is("source", "*", "registry"), e.is("registry", "index"):
					r.addFrom(e.value, f, strings.Join(e.path, "."), OriginUser)
				case e.is("source", "crates-io", "replace-with"):
					replaced = true
				}
			}
		}
	}
	if warn && !replaced {
		r.warn("cargo's default registry is built into cargo, not named in any file jail reads, so it is not allowed; name a mirror in ~/.cargo/config.toml ([source.crates-io] replace-with) or allow the registry's hosts with --allow-domain")
	}
}

// hostOf is the host[:port] of a registry URL ("" when it names none);
// cargo's sparse+ and registry+ and git's git+ prefixes are dropped, and a
// bare name is taken as https.
func hostOf(u string) string {
	for _, p := range []string{"sparse+", "registry+", "git+"} {
		u = strings.TrimPrefix(u, p)
	}
	if !strings.Contains(u, "://") {
		u = "https://" + u
	}
	p, err := url.Parse(u)
	if err != nil || p.Hostname() == "" {
		return ""
	}
	if p.Port() != "" {
		return joinHostPort(p.Hostname(), p.Port())
	}
	return p.Hostname()
}

// joinHostPort joins a host and port the way network.allow writes them.
func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

// OwnAllow is what the user allows themselves: network.allow of the
// user's config, profiles, --settings and --allow-domain, not the
// project's jail.json nor a profile a learning run wrote.
func OwnAllow(layers []*Config) []string {
	var out []string
	for _, l := range layers {
		if !l.Project && !l.FromLearning {
			out = Union(out, l.Network.Allow)
		}
	}
	return out
}

// RegistryDecision is what a command's registries grant once the proxy's
// address rules and trust are applied.
type RegistryDecision struct {
	Allow []string // hosts for network.allow
	// Widening lists what project files add beyond the user's own
	// settings, as network.allow in the project's jail.json would.
	Widening []string
	// Untrusted are the project files among them not trusted as they
	// are, each with what it adds.
	Untrusted []UntrustedFile
	Warnings  []string
}

// UntrustedFile is a project toolchain file that widens the jail and is
// not trusted with the content read.
type UntrustedFile struct {
	ToolchainFile
	Widening []string
}

// Decide applies the proxy's address rules and trust to the registries.
// A host the user names (own: OwnAllow) or that the user's environment or
// config names is allowed. Any other host that is not a plain public name
// (an IP literal, localhost) is dropped with a warning, as the proxy
// would refuse it. A project file's host widens the jail and needs trust.
func (r *Registries) Decide(own []string, home string, getenv func(string) string) RegistryDecision {
	d := RegistryDecision{Warnings: r.Warnings}
	mine := append([]string{}, own...)
	for _, reg := range r.Hosts {
		if reg.Origin == OriginUser && localAddress(reg.Host) != "not a host name" {
			mine = Union(mine, []string{reg.Host})
		}
	}
	trusted := readTrust(home, getenv)
	for _, reg := range r.Hosts {
		why := localAddress(reg.Host)
		switch {
		case why == "not a host name":
			d.Warnings = append(d.Warnings, fmt.Sprintf("ignored registry %q from %s: not a host name", clip(reg.Host), reg.Setting))
			continue
		case reg.Origin == OriginUser || namedBy(mine, reg.Host):
			d.Allow = Union(d.Allow, []string{reg.Host})
			continue
		case why != "":
			d.Warnings = append(d.Warnings, fmt.Sprintf("ignored registry %s from %s: %s is allowed only when your own config or --allow-domain names it", shown(reg.Host), reg.Setting, why))
			continue
		}
		d.Allow = Union(d.Allow, []string{reg.Host})
		if reg.Origin != OriginProject {
			continue
		}
		w := reg.widening()
		d.Widening = append(d.Widening, w)
		if f := r.file(reg.File); trusted[f.Path] != f.Hash {
			d.untrusted(f, w)
		}
	}
	return d
}

// widening is what a project file's registry adds, as the trust prompt
// shows it: Setting is quoted already, and the host is.
func (reg Registry) widening() string {
	return fmt.Sprintf("%s %s (project toolchain config)", reg.Setting, shown(reg.Host))
}

// FileWidening is, for each project file read, what its registries would
// add to any command's jail: every host it names that the proxy's rules
// let a file name at all, whatever the user's own config already allows.
// It is what `jail trust` shows of the files it records.
func (r *Registries) FileWidening() map[string][]string {
	out := map[string][]string{}
	for _, reg := range r.Hosts {
		if reg.Origin == OriginProject && localAddress(reg.Host) == "" {
			out[reg.File] = append(out[reg.File], reg.widening())
		}
	}
	return out
}

// file is the project file read at path, with its hash.
func (r *Registries) file(path string) ToolchainFile {
	for _, f := range r.Files {
		if f.Path == path {
			return f
		}
	}
	return ToolchainFile{Path: path}
}

// untrusted adds what an untrusted file widens.
func (d *RegistryDecision) untrusted(f ToolchainFile, widening string) {
	for i := range d.Untrusted {
		if d.Untrusted[i].Path == f.Path {
			d.Untrusted[i].Widening = append(d.Untrusted[i].Widening, widening)
			return
		}
	}
	d.Untrusted = append(d.Untrusted, UntrustedFile{f, []string{widening}})
}

// splitHost splits host[:port] into the name and the port a connection to
// it would use (443 when none is written).
func splitHost(h string) (string, int) {
	name, port := h, 443
	if i := strings.LastIndexByte(h, ':'); i >= 0 && !strings.HasSuffix(h, "]") && (strings.Count(h, ":") == 1 || strings.HasPrefix(h, "[")) {
		if p, err := strconv.Atoi(h[i+1:]); err == nil {
			name, port = h[:i], p
		}
	}
	return strings.TrimSuffix(strings.TrimPrefix(name, "["), "]"), port
}

// namedBy reports whether an entry of list (network.allow syntax) allows
// host[:port].
func namedBy(list []string, h string) bool {
	name, port := splitHost(h)
	return proxy.Rules{Allow: list}.Decide(name, port).Allow
}

// localAddress says why a registry host must not be allowed on a file's
// word alone, by the proxy's own rules: "not a host name" for what the
// proxy would never accept, "an IP address" for a literal (loopback,
// private, link-local and metadata addresses among them, which the proxy
// dials only when a rule names them), "a loopback name" for localhost;
// "" for a plain name, which the proxy still refuses should it resolve to
// a local address.
func localAddress(h string) string {
	name, port := splitHost(h)
	d := proxy.Rules{}.Decide(name, port)
	switch {
	case d.Reason == "invalid host":
		return "not a host name"
	case d.Reason == "ip literal":
		return "an IP address"
	}
	n := strings.TrimSuffix(strings.ToLower(name), ".")
	if n == "localhost" || strings.HasSuffix(n, ".localhost") {
		return "a loopback name"
	}
	return ""
}
