package remote

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

const (
	envKey    = "sk-live-4f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c"
	envPass   = "hunter2-Zq8xWv3"
	prodToken = "ghp_R4nd0mT0k3nV4lu3F0rT3st1ngAbCdEf12"
	denied    = "DENIED-FILE-CONTENT-7f3a"
	awsSecret = "AWS-HOME-STORE-SECRET-91bd"
	dirSecret = "xoxb-1234567890-abcdefABCDEF0123456789"
)

// plantSecrets fills the project with every kind of file that must reach
// the remote masked or not at all, each under the names an attacker
// would try: a .env, a symlinked .env whose target has a plain name, a
// denied file and a hard link to it, a hard link to the .env, and a hard
// link to a credential store of the home, and a .envs symlink to a
// directory with a plain name.
func (e *syncEnv) plantSecrets() {
	t := e.t
	e.write(e.root, ".env", "API_KEY="+envKey+"\nDB_URL=postgres://app:"+envPass+"@db.example.test/app\nDEBUG=1\n")
	e.write(e.root, "config/prod.settings", "GITHUB_TOKEN="+prodToken+"\n")
	if err := os.Symlink("config/prod.settings", filepath.Join(e.root, ".env.production")); err != nil {
		t.Fatal(err)
	}
	e.write(e.root, "keys/deploy.pem", denied)
	e.pol.DenyRead = []string{filepath.Join(e.root, "keys"), filepath.Join(e.root, "**/*.secret")}
	e.write(e.root, "deep/x/token.secret", denied)
	link := func(from, to string) {
		if err := os.Link(from, to); err != nil {
			t.Fatal(err)
		}
	}
	link(filepath.Join(e.root, "keys/deploy.pem"), filepath.Join(e.root, "README.pem.txt"))
	link(filepath.Join(e.root, ".env"), filepath.Join(e.root, "notes.txt"))
	e.write(e.home, ".aws/credentials", "[default]\naws_secret_access_key = "+awsSecret+"\n")
	link(filepath.Join(e.home, ".aws/credentials"), filepath.Join(e.root, "aws.txt"))
	if err := os.Symlink(filepath.Join(e.home, ".aws/credentials"), filepath.Join(e.root, "creds")); err != nil {
		t.Fatal(err)
	}
	e.write(e.root, "settings/prod", "SESSION_SECRET="+dirSecret+"\n")
	if err := os.Symlink("settings", filepath.Join(e.root, ".envs")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(e.root, "pipe"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.write(e.root, "src/main.go", "package main\n")
}

// TestSyncSecretsNeverLeave greps the whole remote home for every secret
// value after a sync, by rsync and by tar: masked files arrive as their
// masked copies, denied files and their other names not at all.
func TestSyncSecretsNeverLeave(t *testing.T) {
	for _, mode := range []string{"rsync", "tar"} {
		t.Run(mode, func(t *testing.T) {
			e := newSyncEnv(t)
			e.plantSecrets()
			var conn SyncConn = e.conn
			if mode == "tar" {
				conn = tarConn{e.conn}
			} else {
				needRsync(t)
			}
			rep := e.sync(conn)
			if rep.Via != mode {
				t.Errorf("sent by %q, want %q", rep.Via, mode)
			}
			grepTree(t, e.rem, envKey, envPass, prodToken, denied, awsSecret, dirSecret)
			ws := e.workspace()
			if got := e.read(ws, "src/main.go"); got != "package main\n" {
				t.Errorf("src/main.go on the remote: %q", got)
			}
			ph, _ := e.phs.Mask("API_KEY", envKey)
			if env := e.read(ws, ".env"); !strings.Contains(env, "API_KEY="+ph) || !strings.Contains(env, "DEBUG=1") {
				t.Errorf("the remote .env is not the masked copy with the run's placeholders:\n%s", env)
			}
			if !strings.Contains(e.read(ws, "config/prod.settings"), "GITHUB_TOKEN=") {
				t.Error("the .env symlink's target did not arrive masked")
			}
			for _, p := range []string{"keys/deploy.pem", "keys", "deep/x/token.secret", "README.pem.txt", "notes.txt", "aws.txt", "pipe"} {
				if exists(filepath.Join(ws, p)) {
					t.Errorf("%s reached the remote", p)
				}
				if !hasString(rep.NotSent, p) {
					t.Errorf("%s is not reported as not sent: %v", p, rep.NotSent)
				}
			}
			if l, err := os.Readlink(filepath.Join(ws, "creds")); err != nil || l != filepath.Join(e.home, ".aws/credentials") {
				t.Errorf("the symlink to a credential store is not sent as the same symlink: %q, %v", l, err)
			}
		})
	}
}

// TestSyncSymlinkOutNotFollowed: symlinks to /etc and to a file in it
// reach the remote as symlinks; nothing of /etc is copied.
func TestSyncSymlinkOutNotFollowed(t *testing.T) {
	for _, mode := range []string{"rsync", "tar"} {
		t.Run(mode, func(t *testing.T) {
			e := newSyncEnv(t)
			for name, target := range map[string]string{"etc": "/etc", "passwd": "/etc/passwd", "up": "../../.."} {
				if err := os.Symlink(target, filepath.Join(e.root, name)); err != nil {
					t.Fatal(err)
				}
			}
			var conn SyncConn = e.conn
			if mode == "tar" {
				conn = tarConn{e.conn}
			} else {
				needRsync(t)
			}
			e.sync(conn)
			ws := e.workspace()
			for name, target := range map[string]string{"etc": "/etc", "passwd": "/etc/passwd", "up": "../../.."} {
				fi, err := os.Lstat(filepath.Join(ws, name))
				if err != nil || fi.Mode()&os.ModeSymlink == 0 {
					t.Fatalf("%s is not a symlink on the remote: %v %v", name, fi, err)
				}
				if l, _ := os.Readlink(filepath.Join(ws, name)); l != target {
					t.Errorf("%s -> %q, want %q", name, l, target)
				}
			}
			n := 0
			filepath.WalkDir(ws, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.Type().IsRegular() {
					n++
				}
				return nil
			})
			if n != 0 {
				t.Errorf("%d regular files on the remote: a symlink was followed", n)
			}
		})
	}
}

// TestSyncIncremental: a second sync with nothing changed sends nothing
// and runs one listing; one changed file sends one file.
func TestSyncIncremental(t *testing.T) {
	for _, mode := range []string{"rsync", "tar"} {
		t.Run(mode, func(t *testing.T) {
			e := newSyncEnv(t)
			e.plantSecrets()
			for i := 0; i < 20; i++ {
				e.write(e.root, filepath.Join("pkg", string(rune('a'+i))+".txt"), strings.Repeat("x", i))
			}
			var conn SyncConn = e.conn
			if mode == "tar" {
				conn = tarConn{e.conn}
			} else {
				needRsync(t)
			}
			if first := e.sync(conn); first.Sent < 20 {
				t.Fatalf("the first sync sent %d files", first.Sent)
			}
			counter := &countConn{SyncConn: conn}
			again := e.sync(counter)
			if again.Sent != 0 || again.Deleted != 0 || again.Via != "" || counter.runs != 1 {
				t.Errorf("a second sync with nothing changed sent %d, removed %d, via %q, in %d remote runs", again.Sent, again.Deleted, again.Via, counter.runs)
			}
			e.write(e.root, "pkg/c.txt", "changed")
			os.Remove(filepath.Join(e.root, "pkg/d.txt"))
			third := e.sync(conn)
			if third.Sent != 1 || third.Deleted != 1 {
				t.Errorf("one change and one removal: sent %d, removed %d", third.Sent, third.Deleted)
			}
			if e.read(e.workspace(), "pkg/c.txt") != "changed" || exists(filepath.Join(e.workspace(), "pkg/d.txt")) {
				t.Error("the change or the removal did not reach the remote")
			}
		})
	}
}

// countConn counts remote runs.
type countConn struct {
	SyncConn
	runs int
}

func (c *countConn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	c.runs++
	return c.SyncConn.Run(ctx, script, stdin, stdout, stderr)
}

// TestSyncBackPlantedFilesNotApplied: a compromised remote plants hooks,
// git config, a nested repository's config, a bare-repository HEAD,
// .envrc, jail.json, editor and agent settings, and rewrites the masked
// .env: none is applied locally, each is kept and reported, while an
// ordinary change comes back.
func TestSyncBackPlantedFilesNotApplied(t *testing.T) {
	e := newSyncEnv(t)
	e.plantSecrets()
	e.write(e.root, ".git/HEAD", "ref: refs/heads/main\n")
	e.write(e.root, ".git/config", "[core]\n\tbare = false\n")
	e.write(e.root, "jail.json", "{}\n")
	e.write(e.root, "vendor/lib/.git/HEAD", "ref: refs/heads/main\n")
	e.write(e.root, "fixtures/repo.git/HEAD", "ref: refs/heads/main\n")
	e.write(e.root, "fixtures/repo.git/config", "[core]\n\tbare = true\n")
	e.sync(e.conn)
	ws := e.workspace()
	planted := map[string]string{
		".git/hooks/pre-commit":               "#!/bin/sh\ntouch /tmp/pwned\n",
		".git/config":                         "[core]\n\tfsmonitor = touch /tmp/pwned\n",
		"vendor/lib/.git/config":              "[core]\n\tfsmonitor = touch /tmp/pwned\n",
		"vendor/lib/.git/hooks/post-checkout": "#!/bin/sh\n",
		"newrepo/.git":                        "gitdir: /tmp/evil\n",
		"bare/HEAD":                           "ref: refs/heads/main\n",
		".envrc":                              "touch /tmp/pwned\n",
		"jail.json":                           `{"filesystem": {"allowWrite": ["~"]}}`,
		"sub/jail.json":                       `{"filesystem": {"allowWrite": ["~"]}}`,
		".vscode/tasks.json":                  `{"tasks": [{"runOptions": {"runOn": "folderOpen"}}]}`,
		".claude/settings.json":               `{"hooks": {}}`,
		".env":                                "API_KEY=changed-remotely\n",
	}
	for p, c := range planted {
		e.write(ws, p, c)
	}
	e.write(ws, "src/main.go", "package main // edited remotely\n")
	rep := e.back(e.conn)
	if got := e.read(e.root, "src/main.go"); got != "package main // edited remotely\n" || !hasString(rep.Applied, "src/main.go") {
		t.Errorf("the ordinary change did not come back: %q, applied %v", got, rep.Applied)
	}
	for p, c := range planted {
		if b, err := os.ReadFile(filepath.Join(e.root, p)); err == nil && string(b) == c {
			t.Errorf("%s was applied locally", p)
		}
		if !hasString(rep.Kept, p) {
			t.Errorf("%s is not reported as kept: %v", p, rep.Kept)
		}
		if rep.KeptDir == "" || !strings.HasPrefix(rep.KeptDir, e.state) {
			t.Fatalf("kept dir %q is not in the state dir", rep.KeptDir)
		}
		if got, err := os.ReadFile(filepath.Join(rep.KeptDir, p)); err != nil || string(got) != c {
			t.Errorf("%s is not kept aside: %q, %v", p, got, err)
		}
	}
	if !strings.Contains(e.read(e.root, ".env"), envKey) {
		t.Error("the local .env lost its real values")
	}
	// The next sync puts the local versions back over the planted ones.
	e.sync(e.conn)
	if got := e.read(ws, ".git/config"); strings.Contains(got, "fsmonitor") {
		t.Errorf("the remote still has the planted git config after the next sync:\n%s", got)
	}
}

// TestSyncBackConflictKept: a file changed on both sides keeps the local
// version and gets the remote's beside it; a remote removal is applied
// to an unchanged file only.
func TestSyncBackConflictKept(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "both.txt", "base\n")
	e.write(e.root, "remote-only.txt", "base\n")
	e.write(e.root, "gone.txt", "base\n")
	e.write(e.root, "gone-but-edited.txt", "base\n")
	e.write(e.root, "mode-only.sh", "#!/bin/sh\n")
	e.sync(e.conn)
	os.Chmod(filepath.Join(e.workspace(), "mode-only.sh"), 0o755)
	ws := e.workspace()
	e.write(ws, "both.txt", "remote edit\n")
	e.write(ws, "remote-only.txt", "remote edit\n")
	e.write(ws, "new/file.txt", "new remotely\n")
	os.Chmod(filepath.Join(ws, "remote-only.txt"), 0o755)
	os.Remove(filepath.Join(ws, "gone.txt"))
	os.Remove(filepath.Join(ws, "gone-but-edited.txt"))
	e.write(e.root, "both.txt", "local edit\n")
	e.write(e.root, "gone-but-edited.txt", "local edit\n")
	rep := e.back(e.conn)
	if got := e.read(e.root, "both.txt"); got != "local edit\n" {
		t.Errorf("the local edit was overwritten: %q", got)
	}
	if got := e.read(e.root, "both.txt"+ConflictSuffix); got != "remote edit\n" || !hasString(rep.Conflicts, "both.txt") {
		t.Errorf("the remote version is not kept beside it: %q, conflicts %v", got, rep.Conflicts)
	}
	if got := e.read(e.root, "remote-only.txt"); got != "remote edit\n" {
		t.Errorf("remote-only change not applied: %q", got)
	}
	for _, p := range []string{"remote-only.txt", "mode-only.sh"} {
		if fi, err := os.Stat(filepath.Join(e.root, p)); err != nil || fi.Mode().Perm() != 0o755 {
			t.Errorf("the remote's mode of %s did not come back: %v %v", p, fi.Mode(), err)
		}
	}
	if got := e.read(e.root, "new/file.txt"); got != "new remotely\n" {
		t.Errorf("new remote file not applied: %q", got)
	}
	if exists(filepath.Join(e.root, "gone.txt")) {
		t.Error("the remote removal of an unchanged file was not applied")
	}
	if got := e.read(e.root, "gone-but-edited.txt"); got != "local edit\n" || !hasString(rep.NotDeleted, "gone-but-edited.txt") {
		t.Errorf("a locally edited file removed remotely was lost: %q, %v", got, rep.NotDeleted)
	}
	// The next sync sends the local version; nothing is refused.
	if _, err := Sync(context.Background(), e.cfg(e.conn)); err != nil {
		t.Fatal(err)
	}
	if got := e.read(ws, "both.txt"); got != "local edit\n" {
		t.Errorf("the next sync did not send the local version: %q", got)
	}
}

// TestSyncBackSymlinkParentRefused: the remote replaces a symlinked
// directory with a real one and writes into it; the local symlink to a
// directory outside the project is never written through.
func TestSyncBackSymlinkParentRefused(t *testing.T) {
	e := newSyncEnv(t)
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(e.root, "out")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(".git/hooks", filepath.Join(e.root, "hooks")); err != nil {
		t.Fatal(err)
	}
	e.write(e.root, ".git/HEAD", "ref: refs/heads/main\n")
	e.sync(e.conn)
	ws := e.workspace()
	for _, l := range []string{"out", "hooks"} {
		os.Remove(filepath.Join(ws, l))
		e.write(ws, l+"/planted", "#!/bin/sh\n")
	}
	e.write(ws, "etc-link/x", "")
	os.RemoveAll(filepath.Join(ws, "etc-link"))
	os.Symlink("/etc", filepath.Join(ws, "etc-link"))
	rep := e.back(e.conn)
	if exists(filepath.Join(outside, "planted")) {
		t.Error("a file was written through a symlink out of the project")
	}
	if exists(filepath.Join(e.root, ".git/hooks/planted")) {
		t.Error("a hook was written through a symlink in the project")
	}
	if !hasString(rep.Kept, "out/planted") || !hasString(rep.Kept, "hooks/planted") {
		t.Errorf("the refused writes are not reported: %+v", rep)
	}
	if exists(filepath.Join(e.root, "etc-link")) || !hasString(rep.Kept, "etc-link") {
		t.Errorf("a remote symlink to /etc was made locally or not reported: %+v", rep)
	}
}

// TestSyncBackTraversalRefused: a lying remote lists and sends names
// that climb out of the project or are absolute; none is written, and a
// tar entry not asked for fails the fetch.
func TestSyncBackTraversalRefused(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "a.txt", "a\n")
	e.sync(e.conn)
	parent := filepath.Dir(e.root)
	evil := []string{"../escaped", "/tmp/" + filepath.Base(parent) + "-abs", "a/../../escaped2", "./dot", "x//y", ".."}
	liar := &lyingConn{SyncConn: e.conn, extra: evil}
	rep, err := SyncBack(context.Background(), e.cfg(liar))
	if err != nil {
		t.Fatalf("SyncBack: %v", err)
	}
	for _, p := range evil {
		if !hasString(rep.Refused, p) {
			t.Errorf("%q is not refused: %v", p, rep.Refused)
		}
	}
	for _, p := range []string{filepath.Join(parent, "escaped"), filepath.Join(parent, "escaped2"), "/tmp/" + filepath.Base(parent) + "-abs"} {
		if exists(p) {
			t.Errorf("%s was written outside the project", p)
		}
	}
	// A tar holding a name the fetch did not ask for fails it whole.
	e.write(e.workspace(), "a.txt", "changed\n")
	sneaky := &lyingConn{SyncConn: e.conn, tarName: "../escaped3"}
	if _, err := SyncBack(context.Background(), e.cfg(sneaky)); err == nil || !strings.Contains(err.Error(), "not asked for") {
		t.Errorf("a tar entry not asked for was taken: %v", err)
	}
	if exists(filepath.Join(parent, "escaped3")) {
		t.Error("escaped3 was written outside the project")
	}
}

// TestSyncBackDropKeepsRemote: a link dropped during the fetch leaves the
// workspace on the remote, says how to fetch later, and blocks a sync
// that would overwrite the remote changes until they are fetched.
func TestSyncBackDropKeepsRemote(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "work.txt", "base\n")
	e.sync(e.conn)
	ws := e.workspace()
	e.write(ws, "work.txt", "remote work\n")
	_, err := SyncBack(context.Background(), e.cfg(&dropConn{SyncConn: e.conn}))
	if err == nil || !strings.Contains(err.Error(), "--remote-fetch") {
		t.Fatalf("a dropped fetch does not say how to fetch later: %v", err)
	}
	if e.read(ws, "work.txt") != "remote work\n" || e.read(e.root, "work.txt") != "base\n" {
		t.Fatal("the remote or the local work changed after a dropped fetch")
	}
	if _, err := Sync(context.Background(), e.cfg(e.conn)); !errors.Is(err, ErrUnfetched) {
		t.Fatalf("a sync over unfetched remote changes was not refused: %v", err)
	}
	e.back(e.conn)
	if e.read(e.root, "work.txt") != "remote work\n" {
		t.Error("the later fetch did not bring the remote work")
	}
	if _, err := Sync(context.Background(), e.cfg(e.conn)); err != nil {
		t.Errorf("sync after the fetch: %v", err)
	}
}

// TestSyncRefusesUnfetchedChanges: remote changes never fetched (the
// fetch never ran) are not overwritten by the next sync.
func TestSyncRefusesUnfetchedChanges(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "f.txt", "base\n")
	e.sync(e.conn)
	e.write(e.workspace(), "f.txt", "remote\n")
	if _, err := Sync(context.Background(), e.cfg(e.conn)); !errors.Is(err, ErrUnfetched) || !strings.Contains(err.Error(), "--remote-fetch") {
		t.Fatalf("want a refusal naming the fetch: %v", err)
	}
	if e.read(e.workspace(), "f.txt") != "remote\n" {
		t.Error("the remote change was overwritten")
	}
}

// TestRemoveWorkspace removes the workspace and its manifest, never the
// remote home.
func TestRemoveWorkspace(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "f.txt", "x")
	e.sync(e.conn)
	if err := RemoveWorkspace(context.Background(), e.cfg(e.conn)); err != nil {
		t.Fatal(err)
	}
	if exists(e.workspace()) || !exists(e.rem) {
		t.Error("the workspace is still there, or the home went with it")
	}
	if m, _ := LoadManifest(SyncStateDir(e.state, "remote.example.test", e.root)); m != nil {
		t.Error("the manifest outlived the workspace")
	}
	cfg := e.cfg(e.conn)
	cfg.Dir = "~"
	if err := RemoveWorkspace(context.Background(), cfg); err == nil || !exists(e.rem) {
		t.Errorf("removing the home as a workspace was not refused: %v", err)
	}
	e.sync(e.conn) // a fresh workspace after removal
}

// cutConn loses the link part way through the tar the sync sends.
type cutConn struct {
	SyncConn
	after int64
}

func (c *cutConn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	if strings.Contains(script, "tar -x") {
		err := c.SyncConn.Run(ctx, script, io.LimitReader(stdin, c.after), stdout, stderr)
		io.Copy(io.Discard, stdin)
		if err == nil {
			err = errors.New("ssh: connection closed")
		}
		return err
	}
	return c.SyncConn.Run(ctx, script, stdin, stdout, stderr)
}

// TestSyncPartialResumes: a first sync cut part way leaves a workspace
// the next sync completes (it is not taken for unfetched work), with
// every file whole.
func TestSyncPartialResumes(t *testing.T) {
	e := newSyncEnv(t)
	for i := 0; i < 8; i++ {
		e.write(e.root, filepath.Join("d", string(rune('a'+i))+".bin"), strings.Repeat(string(rune('a'+i)), 3000))
	}
	cut := &cutConn{SyncConn: tarConn{e.conn}, after: 20000}
	cfg := e.cfg(cut)
	cfg.Rsh = nil // all in the tar
	if _, err := Sync(context.Background(), cfg); err == nil {
		t.Fatal("a cut sync reported success")
	}
	if !exists(filepath.Join(e.workspace(), "d/a.bin")) {
		t.Fatal("the cut sync sent nothing: the test does not cut part way")
	}
	rep := e.sync(tarConn{e.conn})
	if rep.Sent == 0 {
		t.Error("the resumed sync sent nothing")
	}
	for i := 0; i < 8; i++ {
		p := filepath.Join("d", string(rune('a'+i))+".bin")
		if got := e.read(e.workspace(), p); got != strings.Repeat(string(rune('a'+i)), 3000) {
			t.Errorf("%s is not whole on the remote (%d bytes)", p, len(got))
		}
	}
}

// TestSyncMaskedCopies: with the local run's masked copies, a masked
// file goes as its copy, and one the run has no copy of is not sent.
func TestSyncMaskedCopies(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, ".env", "API_KEY="+envKey+"\n")
	e.write(e.root, ".env.local", "API_KEY="+envPass+"\n")
	copyDir := t.TempDir()
	e.write(copyDir, "env-0", "API_KEY=placeholder-from-the-run\n")
	cfg := e.cfg(e.conn)
	cfg.Mask = MaskedCopies(map[string]string{filepath.Join(e.root, ".env"): filepath.Join(copyDir, "env-0")})
	rep, err := Sync(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := e.read(e.workspace(), ".env"); got != "API_KEY=placeholder-from-the-run\n" {
		t.Errorf("the remote .env is not the run's copy: %q", got)
	}
	if exists(filepath.Join(e.workspace(), ".env.local")) || !hasString(rep.NotSent, ".env.local") {
		t.Errorf(".env.local, with no copy, reached the remote or is not reported: %v", rep.NotSent)
	}
	grepTree(t, e.rem, envKey, envPass)
}

// TestSyncRefusesHomeAsWorkspace: a workspace that is the remote home
// (or above it) is refused before anything there is touched.
func TestSyncRefusesHomeAsWorkspace(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "f.txt", "x")
	e.write(e.rem, ".bashrc", "keep me\n")
	for _, dir := range []string{"~", "~/", e.rem, filepath.Dir(e.rem), "/"} {
		cfg := e.cfg(e.conn)
		cfg.Dir = dir
		if _, err := Sync(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "home or above it") {
			t.Errorf("workspace %q: %v", dir, err)
		}
		if _, err := SyncBack(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "home or above it") {
			t.Errorf("fetching from workspace %q: %v", dir, err)
		}
		if err := RemoveWorkspace(context.Background(), cfg); err == nil {
			t.Errorf("removing workspace %q was not refused", dir)
		}
	}
	if e.read(e.rem, ".bashrc") != "keep me\n" {
		t.Error("the remote home was touched")
	}
}

// TestSyncIgnoresProjectFilterFiles: filter files a repository carries
// (.rsync-filter, .cvsignore) do not steer what rsync sends.
func TestSyncIgnoresProjectFilterFiles(t *testing.T) {
	needRsync(t)
	e := newSyncEnv(t)
	e.write(e.root, ".rsync-filter", "- *.go\n- /docs/\n")
	e.write(e.root, ".cvsignore", "*.go\n")
	e.write(e.root, "src/main.go", "package main\n")
	e.write(e.root, "docs/a.md", "# a\n")
	if rep := e.sync(e.conn); rep.Via != "rsync" {
		t.Fatalf("sent by %q, want rsync", rep.Via)
	}
	for _, p := range []string{"src/main.go", "docs/a.md", ".rsync-filter", ".cvsignore"} {
		if !exists(filepath.Join(e.workspace(), p)) {
			t.Errorf("%s did not arrive: a filter file from the project steered rsync", p)
		}
	}
}

// TestSyncRefusalEscapesRemoteNames: a remote that plants a file whose
// name is a terminal escape sequence gets its name into jail's refusal
// escaped, never as raw control characters.
func TestSyncRefusalEscapesRemoteNames(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "f.txt", "base\n")
	e.sync(e.conn)
	liar := &lyingConn{SyncConn: e.conn, extra: []string{"\x1b]0;pwned\x07"}}
	_, err := Sync(context.Background(), e.cfg(liar))
	if !errors.Is(err, ErrUnfetched) {
		t.Fatalf("want a refusal of the planted name: %v", err)
	}
	if strings.ContainsAny(err.Error(), "\x1b\x07") {
		t.Errorf("the planted name reached the message raw: %q", err)
	}
}

// TestSyncBackCaseVariantsNotApplied: on a case-insensitive filesystem
// (macOS's, a casefold directory) .GIT/hooks is .git/hooks and .ENV is
// .env; a compromised remote planting the protected and masked paths
// under another case, or with a code point HFS+ ignores, gets none of
// them applied: each is kept aside.
func TestSyncBackCaseVariantsNotApplied(t *testing.T) {
	e := newSyncEnv(t)
	e.plantSecrets()
	e.sync(e.conn)
	ws := e.workspace()
	planted := map[string]string{
		".GIT/hooks/pre-commit":           "#!/bin/sh\ntouch /tmp/pwned\n",
		".Git/config":                     "[core]\n\tfsmonitor = touch /tmp/pwned\n",
		"vendor/.gIt/hooks/post-checkout": "#!/bin/sh\n",
		".g\u200cit/hooks/pre-push":       "#!/bin/sh\n",
		".ENVRC":                          "touch /tmp/pwned\n",
		".VSCode/tasks.json":              `{"tasks": []}`,
		"JAIL.json":                       `{"filesystem": {"allowWrite": ["~"]}}`,
		".Env":                            "API_KEY=changed-remotely\n",
		"bare/Head":                       "ref: refs/heads/main\n",
		".claude/Settings.json":           `{"hooks": {}}`,
		".git/hook\u017f/post-merge":      "#!/bin/sh\n",
	}
	for p, c := range planted {
		e.write(ws, p, c)
	}
	rep := e.back(e.conn)
	for p, c := range planted {
		if b, err := os.ReadFile(filepath.Join(e.root, p)); err == nil && string(b) == c {
			t.Errorf("%q was applied locally", p)
		}
		if !hasString(rep.Kept, p) {
			t.Errorf("%q is not reported as kept: %v", p, rep.Kept)
		}
	}
}

// floodConn is a compromised remote whose listing never ends.
type floodConn struct{ SyncConn }

func (c *floodConn) Run(ctx context.Context, script string, stdin io.Reader, stdout, stderr io.Writer) error {
	if !strings.Contains(script, "echo LIST") {
		return c.SyncConn.Run(ctx, script, stdin, stdout, stderr)
	}
	if _, err := io.WriteString(stdout, "/w\n/h\nno-rsync\nLIST\n"); err != nil {
		return err
	}
	line := []byte(strings.Repeat("f 644 5 1700000000.0 aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\x00\x00", 1<<12))
	for {
		if _, err := stdout.Write(line); err != nil {
			return nil // the reader gave up, as ssh's end would
		}
	}
}

// TestSyncListingBounded: a remote whose listing never ends is cut off
// at a bound, with an error saying so, instead of filling memory.
func TestSyncListingBounded(t *testing.T) {
	e := newSyncEnv(t)
	e.write(e.root, "f.txt", "base\n")
	_, err := Sync(context.Background(), e.cfg(&floodConn{e.conn}))
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("want the flooded listing refused at its bound: %v", err)
	}
}
