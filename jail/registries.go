package jail

import (
	"bufio"
	"context"
	"encoding/json"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/jailsh/jail/proxy"
)

// toolchainOf names the toolchain whose package registries a command
// needs: npm and its relatives read npm's configuration, go reads Go's.
func toolchainOf(argv []string) string {
	if len(argv) == 0 {
		return ""
	}
	// The commands that pick the node, go and python profiles.
	switch t := commandProfiles[filepath.Base(argv[0])]; t {
	case "node", "go", "python":
		return t
	}
	return ""
}

// registryCache remembers what a toolchain answered when asked for its
// default registry, keyed by the toolchain binary and its modification
// time, so that start-up does not pay for running npm or go every time.
type registryCache map[string]cachedAnswer

type cachedAnswer struct {
	Bin   string    `json:"bin"`
	MTime time.Time `json:"mtime"`
	Value string    `json:"value"`
}

// askToolchain runs `name args...` for a configuration value, through the
// cache in dir.
func askToolchain(cacheDir, key, name string, args ...string) string {
	bin, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	fi, err := os.Stat(bin)
	if err != nil {
		return ""
	}
	path := filepath.Join(cacheDir, "registries.json")
	cache := registryCache{}
	if b, err := os.ReadFile(path); err == nil {
		json.Unmarshal(b, &cache)
	}
	if c, ok := cache[key]; ok && c.Bin == bin && c.MTime.Equal(fi.ModTime()) {
		return c.Value
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).Output()
	if err != nil {
		return ""
	}
	value := strings.TrimSpace(string(out))
	cache[key] = cachedAnswer{bin, fi.ModTime(), value}
	if b, err := json.Marshal(cache); err == nil {
		proxy.WriteFileAtomic(path, b, 0o600)
	}
	return value
}

// npmRegistries returns the registry URLs npm is configured with: the
// environment, the project's, the user's and the global .npmrc (default and
// scoped registries), and npm's own answer only when none is configured.
func npmRegistries(project, home, cacheDir string, getenv func(string) string) []string {
	var urls []string
	for _, k := range []string{"npm_config_registry", "NPM_CONFIG_REGISTRY"} {
		if v := getenv(k); v != "" {
			urls = append(urls, v)
		}
	}
	rcs := []string{filepath.Join(project, ".npmrc"), filepath.Join(home, ".npmrc"), "/etc/npmrc", "/usr/etc/npmrc", "/usr/local/etc/npmrc"}
	if u := getenv("npm_config_userconfig"); u != "" {
		rcs = append(rcs, u)
	}
	haveDefault := len(urls) > 0
	for _, rc := range rcs {
		for _, kv := range readNpmrc(rc) {
			if kv[0] == "registry" {
				haveDefault = true
			}
			urls = append(urls, kv[1])
		}
	}
	if !haveDefault {
		if v := askToolchain(cacheDir, "npm registry", "npm", "config", "get", "registry"); v != "" {
			urls = append(urls, v)
		}
	}
	return urls
}

// readNpmrc returns the registry settings of one .npmrc: "registry" and
// "@scope:registry" keys.
func readNpmrc(path string) [][2]string {
	var out [][2]string
	for _, kv := range readIni(path) {
		k, v := kv[0], strings.Trim(kv[1], `"'`)
		if k == "registry" || (strings.HasPrefix(k, "@") && strings.HasSuffix(k, ":registry")) {
			out = append(out, [2]string{k, v})
		}
	}
	return out
}

// goRegistries returns the module proxy and checksum database URLs Go is
// configured with (GOPROXY, GOSUMDB), asking `go env` when unset.
func goRegistries(cacheDir string, getenv func(string) string) []string {
	proxyList, sumdb := getenv("GOPROXY"), getenv("GOSUMDB")
	if proxyList == "" || sumdb == "" {
		// One `go env` for both, one line each.
		lines := strings.SplitN(askToolchain(cacheDir, "go GOPROXY GOSUMDB", "go", "env", "GOPROXY", "GOSUMDB"), "\n", 2)
		if proxyList == "" {
			proxyList = strings.TrimSpace(lines[0])
		}
		if sumdb == "" && len(lines) == 2 {
			sumdb = strings.TrimSpace(lines[1])
		}
	}
	var urls []string
	for _, p := range strings.FieldsFunc(proxyList, func(r rune) bool { return r == ',' || r == '|' }) {
		if p != "direct" && p != "off" {
			urls = append(urls, p)
		}
	}
	// GOSUMDB is "name", "name+key" or "name+key url"; the name is its host
	// unless a URL follows.
	if f := strings.Fields(sumdb); len(f) > 0 && f[0] != "off" {
		if len(f) > 1 {
			urls = append(urls, f[1])
		} else {
			name, _, _ := strings.Cut(f[0], "+")
			urls = append(urls, "https://"+name)
		}
	}
	return urls
}

// hostsOf turns registry URLs into host[:port] entries for network.allow.
func hostsOf(urls []string) []string {
	var out []string
	for _, u := range urls {
		if !strings.Contains(u, "://") {
			u = "https://" + u
		}
		p, err := url.Parse(u)
		if err != nil || p.Hostname() == "" {
			continue
		}
		h := p.Hostname()
		if p.Port() != "" {
			h += ":" + p.Port()
		}
		out = append(out, h)
	}
	return union(nil, out)
}

// RegistryHosts returns the registry hosts a command's toolchain is
// configured to use; SPEC §2.3: never a host name written into jail.
func RegistryHosts(argv []string, project, home string, getenv func(string) string) []string {
	cacheDir := filepath.Join(home, ".cache", "jail")
	if x := getenv("XDG_CACHE_HOME"); filepath.IsAbs(x) {
		cacheDir = filepath.Join(x, "jail")
	}
	switch toolchainOf(argv) {
	case "node":
		return hostsOf(npmRegistries(project, home, cacheDir, getenv))
	case "go":
		return hostsOf(goRegistries(cacheDir, getenv))
	case "python":
		return hostsOf(pythonRegistries(home, cacheDir, getenv))
	}
	return nil
}

// pythonRegistries returns the package indexes pip and uv are configured
// with (PIP_INDEX_URL, PIP_EXTRA_INDEX_URL, UV_INDEX_URL, UV_DEFAULT_INDEX,
// UV_EXTRA_INDEX_URL, pip.conf), asking pip for its default index and the
// host its files are served from only when none is configured.
func pythonRegistries(home, cacheDir string, getenv func(string) string) []string {
	var urls []string
	for _, k := range []string{"PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX"} {
		if v := getenv(k); v != "" {
			urls = append(urls, v)
		}
	}
	configured := len(urls) > 0
	for _, k := range []string{"PIP_EXTRA_INDEX_URL", "UV_EXTRA_INDEX_URL", "UV_INDEX"} {
		urls = append(urls, strings.Fields(getenv(k))...)
	}
	confs := []string{"/etc/pip.conf", filepath.Join(home, ".pip", "pip.conf"), filepath.Join(home, ".config", "pip", "pip.conf")}
	if x := getenv("PIP_CONFIG_FILE"); x != "" {
		confs = append(confs, x)
	}
	for _, c := range confs {
		for _, kv := range readIni(c) {
			switch kv[0] {
			case "index-url", "index_url":
				configured = true
				urls = append(urls, kv[1])
			case "extra-index-url", "extra_index_url":
				urls = append(urls, strings.Fields(kv[1])...)
			}
		}
	}
	if !configured {
		if v := askToolchain(cacheDir, "pip index", "python3", "-c",
			"from pip._internal.models.index import PyPI; print(PyPI.url, 'https://' + PyPI.file_storage_domain)"); v != "" {
			urls = append(urls, strings.Fields(v)...)
		}
	}
	return urls
}

// readIni returns the key = value pairs of an INI-like file (pip.conf,
// .npmrc), sections and comments ignored.
func readIni(path string) [][2]string {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out [][2]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out = append(out, [2]string{strings.TrimSpace(k), strings.TrimSpace(v)})
		}
	}
	return out
}
