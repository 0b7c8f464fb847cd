package jail

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// cmdHome is a home and a project for ExposeCommand, and the policy.
func cmdHome(t *testing.T) (home, project string, pol *Policy) {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	home, project = filepath.Join(base, "home"), filepath.Join(base, "project")
	for _, d := range []string{home, project} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return home, project, &Policy{ProjectRoot: project}
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, path); err != nil {
		t.Fatal(err)
	}
}

// A venv's script through ~/.local/bin: the venv is shown, the link
// recreated; the interpreter (a system python) needs nothing.
func TestExposeCommandVenv(t *testing.T) {
	home, project, pol := cmdHome(t)
	venv := home + "/.local/share/pipx/venvs/x"
	writeExec(t, venv+"/pyvenv.cfg", "home = /usr/bin\n")
	symlink(t, "/usr/bin/python3", venv+"/bin/python")
	writeExec(t, venv+"/bin/x", "#!"+venv+"/bin/python\n")
	symlink(t, "../share/pipx/venvs/x/bin/x", home+"/.local/bin/x")
	c, err := ExposeCommand(pol, []string{"x"}, home, project, home+"/.local/bin:/usr/bin")
	if err != nil || c == nil {
		t.Fatalf("ExposeCommand = %v, %v", c, err)
	}
	if strings.Join(c.Trees, " ") != venv || len(c.Links) != 1 || c.Links[0].Path != home+"/.local/bin/x" || c.Links[0].Target != "../share/pipx/venvs/x/bin/x" {
		t.Fatalf("trees %v links %v", c.Trees, c.Links)
	}
}

// "#!/usr/bin/env node" follows node on the PATH into its own prefix.
func TestExposeCommandEnvInterpreter(t *testing.T) {
	home, project, pol := cmdHome(t)
	node := home + "/.nvm/versions/node/v1/bin/node"
	writeExec(t, node, "\x7fELF")
	if err := os.MkdirAll(home+"/.nvm/versions/node/v1/lib/node_modules/t/bin", 0o755); err != nil {
		t.Fatal(err)
	}
	writeExec(t, home+"/.nvm/versions/node/v1/lib/node_modules/t/bin/t.js", "#!/usr/bin/env node\n")
	symlink(t, "../lib/node_modules/t/bin/t.js", home+"/.nvm/versions/node/v1/bin/t")
	c, err := ExposeCommand(pol, []string{"t"}, home, project, home+"/.nvm/versions/node/v1/bin:/usr/bin")
	if err != nil || c == nil {
		t.Fatalf("ExposeCommand = %v, %v", c, err)
	}
	want := home + "/.nvm/versions/node/v1/bin/node " + home + "/.nvm/versions/node/v1/lib/node_modules/t"
	if got := strings.Join(c.Trees, " "); got != want && got != strings.Join(strings.Fields(want)[1:], " ")+" "+strings.Fields(want)[0] {
		t.Fatalf("trees %q, want %q", got, want)
	}
}

// Relative PATH entries and chains through the project expose nothing.
func TestExposeCommandIgnoresWhatTheProjectControls(t *testing.T) {
	home, project, pol := cmdHome(t)
	writeExec(t, home+"/.local/share/p/bin/p", "#!/bin/sh\n")
	symlink(t, home+"/.local/share/p/bin/p", project+"/bin/p")
	symlink(t, home+"/.local/share/p/bin/p", project+"/p")
	for _, path := range []string{"bin:/usr/bin", ".:/usr/bin", project + "/bin:/usr/bin"} {
		c, err := ExposeCommand(pol, []string{"p"}, home, project, path)
		if err != nil || c != nil {
			t.Errorf("PATH %s: ExposeCommand = %+v, %v; want nothing", path, c, err)
		}
	}
}

// A link into a credential store, or into a denyRead glob's match, is
// refused.
func TestExposeCommandRefusesMaskedTargets(t *testing.T) {
	home, project, pol := cmdHome(t)
	writeExec(t, home+"/.aws/run", "#!/bin/sh\n")
	symlink(t, "../../.aws/run", home+"/.local/bin/a")
	writeExec(t, home+"/vault/bin/v", "#!/bin/sh\n")
	symlink(t, home+"/vault/bin/v", home+"/.local/bin/v")
	pol.DenyRead = []string{home + "/vau*/**"}
	for _, name := range []string{"a", "v"} {
		_, err := ExposeCommand(pol, []string{name}, home, project, home+"/.local/bin")
		if err == nil || !strings.Contains(err.Error(), "keeps masked") {
			t.Errorf("%s: err = %v, want a refusal", name, err)
		}
	}
}

// A tree with more entries than the bound is refused with the fix.
func TestExposeCommandTooManyEntries(t *testing.T) {
	home, project, pol := cmdHome(t)
	defer func(n int) { maxCommandTree = n }(maxCommandTree)
	maxCommandTree = 5
	writeExec(t, home+"/.tool/pyvenv.cfg", "")
	for _, f := range []string{"a", "b", "c", "d", "e"} {
		writeExec(t, home+"/.tool/lib/"+f, "")
	}
	writeExec(t, home+"/.tool/bin/t", "\x7fELF")
	_, err := ExposeCommand(pol, []string{"t"}, home, project, home+"/.tool/bin")
	if err == nil || !strings.Contains(err.Error(), "more than 5 entries") || !strings.Contains(err.Error(), "--allow-read") {
		t.Fatalf("err = %v", err)
	}
	pol.AllowRead = []string{home + "/.tool"}
	if c, err := ExposeCommand(pol, []string{"t"}, home, project, home+"/.tool/bin"); err != nil || c != nil {
		t.Fatalf("with the tree allowed: %+v, %v; want nothing more to show", c, err)
	}
}

// A command found nowhere is reported; one with a slash, or in learning
// mode, is not looked up.
func TestExposeCommandNotFound(t *testing.T) {
	home, project, pol := cmdHome(t)
	if c, err := ExposeCommand(pol, []string{"no-such-tool"}, home, project, "/usr/bin"); err != nil || c == nil || !c.NotFound || !strings.Contains(c.String(), "install it") {
		t.Fatalf("ExposeCommand = %+v, %v; want NotFound", c, err)
	}
	for _, argv := range []string{"./no-such-tool", "/nope/x"} {
		if c, err := ExposeCommand(pol, []string{argv}, home, project, "/usr/bin"); c != nil || err != nil {
			t.Errorf("%s: %v, %v", argv, c, err)
		}
	}
	pol.Mode = "learning"
	if c, err := ExposeCommand(pol, []string{"no-such-tool"}, home, project, "/usr/bin"); c != nil || err != nil {
		t.Errorf("learning: %v, %v", c, err)
	}
}

// TestExposeCommandShellShims: the wrappers installers leave on PATH (a
// pnpm cmd-shim execing node on "$basedir/…", an older Claude Code's
// ~/.claude/local/claude execing an absolute path) show the install
// prefix of what they exec.
func TestExposeCommandShellShims(t *testing.T) {
	home, _, pol := cmdHome(t)
	pkg := filepath.Join(home, ".local/share/pnpm/global/5/node_modules/@acme/tool")
	writeExec(t, filepath.Join(pkg, "cli.js"), "#!/usr/bin/env node\nconsole.log('hi')\n")
	shim := filepath.Join(home, ".local/share/pnpm/tool")
	writeExec(t, shim, "#!/bin/sh\nbasedir=$(dirname \"$(echo \"$0\" | sed -e 's,\\\\,/,g')\")\n"+
		"if [ -x \"$basedir/node\" ]; then\n  exec \"$basedir/node\"  \"$basedir/global/5/node_modules/@acme/tool/cli.js\" \"$@\"\nelse\n"+
		"  exec node  \"$basedir/global/5/node_modules/@acme/tool/cli.js\" \"$@\"\nfi\n")
	local := filepath.Join(home, ".acme/local")
	writeExec(t, filepath.Join(local, "node_modules/@acme/other/bin.js"), "#!/usr/bin/env node\n")
	symlink(t, "@acme/other/bin.js", filepath.Join(local, "node_modules/.bin-other"))
	writeExec(t, filepath.Join(local, "other"), "#!/bin/bash\nexec \""+filepath.Join(local, "node_modules/.bin-other")+"\" \"$@\"\n")
	for _, tt := range []struct{ dir, name, want string }{
		{filepath.Dir(shim), "tool", filepath.Join(home, ".local/share/pnpm/global/5")}, // the prefix holding node_modules
		{local, "other", local},
	} {
		c, err := ExposeCommand(pol, []string{tt.name}, home, "/", tt.dir+":/usr/bin:/bin")
		if err != nil || c == nil || !slices.Contains(c.Trees, tt.want) {
			t.Errorf("ExposeCommand(%s) = %+v, %v; want %s among the trees", tt.name, c, err, tt.want)
		}
	}
}
