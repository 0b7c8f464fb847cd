package jail

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A quoted value spanning lines (a PEM key) is masked whole: no line of
// the key's body is left in the copy.
func TestMaskEnvFileMultiline(t *testing.T) {
	body := "MIIEowIBAAKCAQEAsecretbodyline1\nsecretbodyline2"
	in := "A=1\nKEY=\"-----BEGIN RSA PRIVATE KEY-----\n" + body + "\n-----END RSA PRIVATE KEY-----\" # key\r\nB='open\nC=3\n"
	got, found := MaskEnvFile([]byte(in), nil, NewPlaceholders("k").Mask)
	out := string(got)
	if strings.Contains(out, "secretbodyline") || !strings.HasPrefix(out, "A=1\nKEY=\"jail-secret-KEY-") || !strings.Contains(out, "\" # key\r\n") {
		t.Errorf("masked:\n%s", out)
	}
	if len(found) != 1 || !strings.Contains(found[0].Value, body) {
		t.Errorf("found %+v", found)
	}
	// B's quote never closes: the rest of the file is its value, kept
	// as written since it is not a secret.
	if !strings.HasSuffix(out, "B='open\nC=3\n") {
		t.Errorf("an unclosed ordinary value changed:\n%s", out)
	}
}

// ReadEnvFile reads regular files only, bounded, without following a last
// symlink or blocking on a FIFO; /proc, /dev and /sys are never read.
func TestReadEnvFile(t *testing.T) {
	dir := t.TempDir()
	reg := filepath.Join(dir, "reg")
	os.WriteFile(reg, []byte("A=1\n"), 0o600)
	os.Symlink(reg, filepath.Join(dir, "link"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o600)
	os.WriteFile(filepath.Join(dir, "big"), make([]byte, maxEnvFile+1), 0o600)
	if got := string(ReadEnvFile(reg)); got != "A=1\n" {
		t.Errorf("regular file: %q", got)
	}
	done := make(chan bool)
	go func() {
		for _, p := range []string{"link", "fifo", "big", "."} {
			if b := ReadEnvFile(filepath.Join(dir, p)); b != nil {
				t.Errorf("%s: read %d bytes, want none", p, len(b))
			}
		}
		for _, p := range []string{"/proc/self/environ", "/dev/zero", "/sys/kernel/mm/transparent_hugepage/enabled"} {
			if b := ReadEnvFile(p); b != nil {
				t.Errorf("%s: read %d bytes, want none", p, len(b))
			}
		}
		done <- true
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("readEnvFile blocked (on the FIFO?)")
	}
}

// An escaped quote does not end a double-quoted value: no tail of the
// secret is left after the placeholder.
func TestMaskEnvFileEscapedQuote(t *testing.T) {
	in := `DB_PASSWORD="abc\"tail-of-the-secret" # c` + "\nSINGLE_TOKEN='x\\'\n"
	got, found := MaskEnvFile([]byte(in), nil, NewPlaceholders("k").Mask)
	if strings.Contains(string(got), "tail-of-the-secret") || len(found) != 2 || found[0].Value != `abc\"tail-of-the-secret` || found[1].Value != `x\` {
		t.Errorf("masked %q, found %+v", got, found)
	}
	if !strings.HasSuffix(strings.SplitN(string(got), "\n", 2)[0], `" # c`) {
		t.Errorf("the comment after the closing quote is lost: %q", got)
	}
}
