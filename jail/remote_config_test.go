package jail

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemoteConfigParses reads a named host with every key, the port as
// a number.
func TestRemoteConfigParses(t *testing.T) {
	c, err := ParseConfig([]byte(`{"remote": {"hetzner": {"host": "box.example.test", "user": "me", "port": 2222, "dir": "~/jail/{project}"}}}`), "config.json")
	if err != nil {
		t.Fatal(err)
	}
	want := RemoteHost{Host: "box.example.test", User: "me", Port: 2222, Dir: "~/jail/{project}"}
	if got := c.Remote["hetzner"]; got != want {
		t.Fatalf("remote hetzner = %+v, want %+v", got, want)
	}
}

// TestRemoteConfigRefusesOptions: a host or user that ssh would read as
// an option (-oProxyCommand=...) or as more than a name, a port out of
// range, a missing host are refused with their position.
func TestRemoteConfigRefusesOptions(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"remote": {"x": {"host": "-oProxyCommand=touch /tmp/pwn"}}}`, `"host" "-oProxyCommand=touch /tmp/pwn" must be`},
		{`{"remote": {"x": {"host": "a b"}}}`, `must be letters`},
		{`{"remote": {"x": {"host": "h", "user": "-lroot"}}}`, `"user" "-lroot" must be`},
		{`{"remote": {"x": {"host": "h", "user": "a@b"}}}`, `"user" "a@b" must be`},
		{`{"remote": {"x": {"host": "h", "port": 70000}}}`, `"port" must be 1-65535`},
		{`{"remote": {"x": {"host": "h", "port": "22"}}}`, `must be a port number`},
		{`{"remote": {"x": {"user": "me"}}}`, `needs a "host"`},
		{`{"remote": {"-x": {"host": "h"}}}`, `remote host name "-x"`},
		{`{"remote": {"x": {"host": "h", "shell": "sh"}}}`, `unknown key "shell"`},
	} {
		_, err := ParseConfig([]byte(tc.doc), "config.json")
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "config.json:1:") {
			t.Errorf("ParseConfig(%s) = %v, want an error at a position with %q", tc.doc, err, tc.want)
		}
	}
}

// TestRemoteOnlyInUserConfig: a project's jail.json, a --settings file
// and a profile cannot name remote hosts, trusted or not; the user's own
// config.json can, and RemoteHosts reads it.
func TestRemoteOnlyInUserConfig(t *testing.T) {
	tmp := t.TempDir()
	home := filepath.Join(tmp, "home")
	proj := filepath.Join(home, "proj")
	xdg := filepath.Join(tmp, "xdg")
	write := func(p, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	getenv := func(k string) string {
		if k == "XDG_CONFIG_HOME" {
			return xdg
		}
		return ""
	}
	write(filepath.Join(proj, ".git", "HEAD"), "ref: refs/heads/main\n")
	write(filepath.Join(xdg, "jail", "config.json"), `{"remote": {"box": {"host": "box.example.test"}}}`)
	if _, _, err := LoadLayers(Options{}, nil, proj, home, getenv); err != nil {
		t.Fatalf("the user config naming a remote host: %v", err)
	}
	hosts, err := RemoteHosts(home, getenv)
	if err != nil || hosts["box"].Host != "box.example.test" {
		t.Fatalf("RemoteHosts = %v, %v", hosts, err)
	}

	evil := `{"remote": {"box": {"host": "evil.example.test"}}}`
	write(filepath.Join(proj, "jail.json"), evil)
	_, _, err = LoadLayers(Options{}, nil, proj, home, getenv)
	if err == nil || !strings.Contains(err.Error(), `jail.json names "remote" hosts`) {
		t.Fatalf("a project jail.json naming a remote host: %v, want it refused", err)
	}
	os.Remove(filepath.Join(proj, "jail.json"))
	write(filepath.Join(proj, "s.json"), evil)
	if _, _, err = LoadLayers(Options{Settings: "s.json"}, nil, proj, home, getenv); err == nil || !strings.Contains(err.Error(), `s.json names "remote"`) {
		t.Fatalf("a --settings file naming a remote host: %v, want it refused", err)
	}
	write(filepath.Join(xdg, "jail", "profiles", "p.json"), evil)
	if _, _, err = LoadLayers(Options{Profiles: []string{"p"}}, nil, proj, home, getenv); err == nil || !strings.Contains(err.Error(), `names "remote"`) {
		t.Fatalf("a profile naming a remote host: %v, want it refused", err)
	}
}
