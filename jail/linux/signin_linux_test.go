package linux

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/jailsh/jail/jail"
)

func signInFixture(t *testing.T, content string) (jail.SignInFile, jail.SessionKey) {
	t.Helper()
	dir := t.TempDir()
	host := filepath.Join(dir, "home", ".credentials.json")
	os.MkdirAll(filepath.Dir(host), 0o700)
	if err := os.WriteFile(host, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	sess := filepath.Join(dir, "run", "session")
	return jail.SignInFile{Path: host, Host: host, Copy: filepath.Join(sess, "signin-0.json"), Rule: jail.SignInRules[0]}, jail.SessionKey("test-key")
}

const (
	testAccess  = "sk-ant-oat01-realAccessTokenRealAccessTokenRealAccessToken-AA"
	testRefresh = "sk-ant-ort01-realRefreshTokenRealRefreshTokenRealRefresh-AA"
)

// The session copy holds shaped placeholders and every other field; a
// file that holds a token outside its place (where no placeholder would
// stand for it) is refused rather than copied.
func TestCopySignInFile(t *testing.T) {
	sf, key := signInFixture(t, `{"claudeAiOauth":{"accessToken":"`+testAccess+`","refreshToken":"`+testRefresh+`","expiresAt":1,"subscriptionType":"max"},"other":{"n":12345678901234567890}}`)
	secrets, _, err := copySignInFile(key, sf)
	if err != nil || len(secrets) != 2 {
		t.Fatalf("copySignInFile: %v, %v", secrets, err)
	}
	b, _ := os.ReadFile(sf.Copy)
	if strings.Contains(string(b), testAccess) || strings.Contains(string(b), testRefresh) ||
		!strings.Contains(string(b), `"sk-ant-oat01-jail`) || !strings.Contains(string(b), `"n":12345678901234567890`) || !strings.Contains(string(b), `"subscriptionType":"max"`) {
		t.Errorf("the session copy: %s", b)
	}
	sf2, _ := signInFixture(t, `{"claudeAiOauth":{"accessToken":"`+testAccess+`"},"backup":"`+testAccess+`"}`)
	if _, _, err := copySignInFile(key, sf2); err == nil {
		t.Errorf("a token copied under another key was not refused")
	}
	sf3, _ := signInFixture(t, `not json`)
	if _, _, err := copySignInFile(key, sf3); err == nil {
		t.Errorf("an invalid sign-in file was copied")
	}
}

// save replaces the host file atomically with the real new tokens, mode
// 0600, the other fields kept, and leaves no temporary file beside it; a
// placeholder is never written.
func TestSignInSave(t *testing.T) {
	sf, key := signInFixture(t, `{"claudeAiOauth":{"accessToken":"`+testAccess+`","refreshToken":"`+testRefresh+`","expiresAt":1,"subscriptionType":"max"}}`)
	os.Chmod(sf.Host, 0o644)
	var before syscall.Stat_t
	syscall.Stat(sf.Host, &before)
	eps, _ := signInEndpoints(&Plan{SignIn: []jail.SignInFile{sf}, SecretKey: key})
	ep := eps[0]
	ph := ep.Mint("access_token", "sk-ant-oat01-newAccessTokenNewAccessTokenNewAccessToken-AA")
	if err := ep.Save(map[string]any{"access_token": ph}); err == nil {
		t.Errorf("a minted placeholder was saved")
	}
	err := ep.Save(map[string]any{"access_token": "sk-ant-oat01-new", "refresh_token": "sk-ant-ort01-new", "expires_in": json.Number("3600"), "scope": "a b"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(sf.Host)
	var got struct {
		O map[string]any `json:"claudeAiOauth"`
	}
	json.Unmarshal(b, &got)
	if got.O["accessToken"] != "sk-ant-oat01-new" || got.O["refreshToken"] != "sk-ant-ort01-new" || got.O["subscriptionType"] != "max" || got.O["expiresAt"].(float64) < 2 {
		t.Errorf("the host file after save: %s", b)
	}
	var after syscall.Stat_t
	syscall.Stat(sf.Host, &after)
	if after.Ino == before.Ino || after.Mode&0o777 != 0o600 {
		t.Errorf("save wrote the file in place or left its mode: inode %d -> %d, mode %o", before.Ino, after.Ino, after.Mode&0o777)
	}
	if m, _ := filepath.Glob(filepath.Join(filepath.Dir(sf.Host), "*")); len(m) != 1 {
		t.Errorf("save left files beside the host file: %v", m)
	}
	// A copy bound over the host file's name: saved in place (the same
	// inode, which the bind hangs on).
	sf.InPlace = true
	eps, _ = signInEndpoints(&Plan{SignIn: []jail.SignInFile{sf}, SecretKey: key})
	ep = eps[0]
	if err := ep.Save(map[string]any{"access_token": "sk-ant-oat01-newer"}); err != nil {
		t.Fatal(err)
	}
	var inPlace syscall.Stat_t
	syscall.Stat(sf.Host, &inPlace)
	if b, _ := os.ReadFile(sf.Host); inPlace.Ino != after.Ino || !strings.Contains(string(b), "sk-ant-oat01-newer") {
		t.Errorf("an in-place save replaced the file (inode %d -> %d) or lost the token: %s", after.Ino, inPlace.Ino, b)
	}
}

// TestSignInLoginNotKeptWithoutTerminal: a sign-in made inside goes to
// Login, not Save; without a terminal to confirm it the host file stays
// as it was (here: missing), and jail says so in one line naming the
// account. Kept, it creates the missing file, mode 0600.
func TestSignInLoginNotKeptWithoutTerminal(t *testing.T) {
	sf, key := signInFixture(t, `{}`)
	os.Remove(sf.Host)
	eps, states := signInEndpoints(&Plan{SignIn: []jail.SignInFile{sf}, SecretKey: key})
	answer := map[string]any{"access_token": "sk-ant-oat01-login", "refresh_token": "sk-ant-ort01-login", "expires_in": json.Number("3600"),
		"account": map[string]any{"email_address": "someone@example.test"}}
	if err := eps[0].Login(answer); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	keepSignIns(states, &out)
	if _, err := os.Stat(sf.Host); err == nil {
		t.Errorf("a sign-in made inside was kept without a terminal")
	}
	if line := out.String(); !strings.Contains(line, "someone@example.test") || !strings.Contains(line, "for this run only") || strings.Count(line, "\n") != 1 {
		t.Errorf("keepSignIns said %q, want one line naming the account", line)
	}
	if err := states[0].save(answer); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(sf.Host)
	fi, _ := os.Stat(sf.Host)
	if err != nil || !strings.Contains(string(b), `"accessToken":"sk-ant-oat01-login"`) || fi.Mode().Perm() != 0o600 {
		t.Errorf("kept into a missing file: %s (%v), mode %v", b, err, fi.Mode())
	}
}
