package jail

import (
	"encoding/base64"
	"regexp"
	"strings"
	"testing"
)

// shapeCases are a real-looking value of every format in secretShapes and
// what its placeholder must look like.
var shapeCases = []struct {
	shape, value string
	want         *regexp.Regexp
	sameLength   bool
}{
	{"anthropic", "sk-ant-api03-" + strings.Repeat("Ab9_", 23) + "AA", regexp.MustCompile(`^sk-ant-api03-jail[A-Za-z0-9]+$`), true},
	{"anthropic", "sk-ant-oat01-" + strings.Repeat("x1", 20), regexp.MustCompile(`^sk-ant-oat01-jail[A-Za-z0-9]+$`), true},
	{"openai-project", "sk-proj-" + strings.Repeat("Zz09", 30), regexp.MustCompile(`^sk-proj-jail[A-Za-z0-9]+$`), true},
	{"openai", "sk-" + strings.Repeat("aB3", 16), regexp.MustCompile(`^sk-jail[A-Za-z0-9]{44}$`), true},
	{"github", "ghp_" + strings.Repeat("a1B2", 9), regexp.MustCompile(`^ghp_jail[A-Za-z0-9]{32}$`), true},
	{"github", "gho_" + strings.Repeat("Q", 36), regexp.MustCompile(`^gho_jail[A-Za-z0-9]{32}$`), true},
	{"github", "ghu_" + strings.Repeat("q", 36), regexp.MustCompile(`^ghu_jail`), true},
	{"github", "ghs_" + strings.Repeat("w", 36), regexp.MustCompile(`^ghs_jail`), true},
	{"github", "ghr_" + strings.Repeat("e", 36), regexp.MustCompile(`^ghr_jail`), true},
	{"github-fine-grained", "github_pat_11ABCDEFG0" + strings.Repeat("x_Y", 24), regexp.MustCompile(`^github_pat_jail[A-Za-z0-9]+$`), true},
	{"gitlab", "glpat-" + strings.Repeat("Ab-1", 5), regexp.MustCompile(`^glpat-jail[A-Za-z0-9]+$`), false},
	{"slack", "xoxb-1234567890-0987654321-" + strings.Repeat("a", 24), regexp.MustCompile(`^xoxb-jail-[A-Za-z0-9]+$`), true},
	{"slack", "xoxp-1234-5678-abcdefghij", regexp.MustCompile(`^xoxp-jail-[A-Za-z0-9]+$`), true},
	{"slack", "xoxa-2-abcdefghijklmnop", regexp.MustCompile(`^xoxa-jail-[A-Za-z0-9]+$`), false},
	{"aws-key-id", "AKIAIOSFODNN7EXAMPLE", regexp.MustCompile(`^AKIAJAIL[A-Z2-7]{12}$`), true},
	{"aws-key-id", "ASIAY34FZKBOKMUTVV7A", regexp.MustCompile(`^ASIAJAIL[A-Z2-7]{12}$`), true},
	{"google", "AIzaSyA-" + strings.Repeat("b", 31), regexp.MustCompile(`^AIzajail[A-Za-z0-9]{31}$`), true},
	{"npm", "npm_" + strings.Repeat("N0", 18), regexp.MustCompile(`^npm_jail[A-Za-z0-9]{32}$`), true},
	{"jwt", testJWT, regexp.MustCompile(`^eyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*jail[A-Za-z0-9_-]*$`), false},
	{"pem", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk=\n-----END OPENSSH PRIVATE KEY-----\n", regexp.MustCompile(`^jail-secret-K-[A-Za-z0-9]{16}$`), false},
	{"pem", `-----BEGIN RSA PRIVATE KEY-----\nMIIEow==\n-----END RSA PRIVATE KEY-----`, regexp.MustCompile(`^jail-secret-K-[A-Za-z0-9]{16}$`), false},
	{"pem", "-----BEGIN PRIVATE KEY-----MIIE-----END PRIVATE KEY-----", regexp.MustCompile(`^jail-secret-K-`), false},
	{"pem", "-----BEGIN PGP PRIVATE KEY BLOCK-----\nlQOYBF\n-----END PGP PRIVATE KEY BLOCK-----", regexp.MustCompile(`^jail-secret-K-`), false},
	{"anthropic", "sk-ant-" + strings.Repeat("k", 40), regexp.MustCompile(`^sk-ant-jail[A-Za-z0-9]{36}$`), true},
	{"anthropic", "sk-ant-secretword-" + strings.Repeat("k", 40), regexp.MustCompile(`^sk-ant-jail[A-Za-z0-9]+$`), true},
}

// testJWT is {"alg":"HS256","typ":"JWT"}.{"sub":"1234567890"}.signature.
const testJWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"

func TestShapesDetectAndShape(t *testing.T) {
	k := SessionKey("k3y")
	for _, c := range shapeCases {
		s := ShapeOf(c.value)
		if s == nil || s.name != c.shape {
			t.Errorf("shapeOf(%.30q) = %v, want %s", c.value, s, c.shape)
			continue
		}
		if !LooksSecret("INNOCENT_NAME", c.value) {
			t.Errorf("LooksSecret(INNOCENT_NAME, %.30q) = false: a %s value is a secret whatever its name", c.value, c.shape)
		}
		ph := k.Placeholder("K", c.value, 0)
		if !c.want.MatchString(ph) {
			t.Errorf("%s: placeholder %q does not match %s", c.shape, ph, c.want)
		}
		if c.sameLength && len(ph) != len(c.value) {
			t.Errorf("%s: placeholder %q is %d bytes, want the value's %d", c.shape, ph, len(ph), len(c.value))
		}
		checkContract(t, ph)
		if strings.Contains(c.value, ph) || strings.Contains(ph, c.value) {
			t.Errorf("%s: placeholder %q holds the value", c.shape, ph)
		}
		if again := ShapeOf(ph); c.shape != "pem" && (again == nil || again.name != c.shape) {
			t.Errorf("%s: the placeholder %q is not itself of the format (a tool checking it would refuse it): %v", c.shape, ph, again)
		}
	}
}

// checkContract checks what the proxy relies on: the bytes a placeholder
// is made of, its length and its marker.
func checkContract(t *testing.T, ph string) {
	t.Helper()
	if !regexp.MustCompile(`^[A-Za-z0-9._-]{20,}$`).MatchString(ph) {
		t.Errorf("placeholder %q: want at least 20 bytes of [A-Za-z0-9._-]", ph)
	}
	if !strings.Contains(ph, "jail") && !strings.Contains(ph, "JAIL") {
		t.Errorf("placeholder %q lacks the jail/JAIL marker", ph)
	}
}

func TestJWTPlaceholderDecodes(t *testing.T) {
	ph := SessionKey("k").Placeholder("T", testJWT, 0)
	parts := strings.Split(ph, ".")
	if len(parts) != 3 {
		t.Fatalf("JWT placeholder %q: want three parts", ph)
	}
	head, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil || !strings.Contains(string(head), `"alg"`) {
		t.Errorf("JWT placeholder header %q: %v", head, err)
	}
	body, _ := base64.RawURLEncoding.DecodeString(parts[1])
	if strings.Contains(string(body), "1234567890") {
		t.Errorf("the JWT placeholder shows the real claims: %s", body)
	}
}

func TestNotShapes(t *testing.T) {
	for _, v := range []string{
		"", "sk-", "sk-short", "sk-ant-", "ghp_", "ghp_short", "ghx_" + strings.Repeat("a", 36),
		"AKIA", "AKIAIOSFODNN7EXAMPL", "AKIAIOSFODNN7EXAMPLEX", "AKIAiosfodnn7example", "AIzaShort",
		"npm_abc", "xoxz-1234567890", "eyJub3Rqc29u.eyJ4IjoxfQ.c2ln", // header not JSON with alg
		"eyJhbGciOiJIUzI1NiJ9.only-two", "-----BEGIN PUBLIC KEY-----", "-----BEGIN CERTIFICATE-----",
		"/usr/local/bin:/usr/bin", "xterm-256color", "en_US.UTF-8", "https://example.test/path",
		"git@github.com:o/r.git", "user@host",
	} {
		if s := ShapeOf(v); s != nil {
			t.Errorf("shapeOf(%q) = %s, want none", v, s.name)
		}
	}
}

// The random part depends on the key, the name and the ordinal, never on
// the value: a short password cannot be recovered from its placeholder.
func TestPlaceholderKeyed(t *testing.T) {
	k := SessionKey("session-key-1")
	a, b := k.Placeholder("DB_PASSWORD", "hunter2", 0), k.Placeholder("DB_PASSWORD", "correct horse", 0)
	if a != b {
		t.Errorf("two values of one shape, same name and ordinal: %q and %q; the placeholder depends on the value", a, b)
	}
	if !regexp.MustCompile(`^jail-secret-DB_PASSWORD-[A-Za-z0-9]{16}$`).MatchString(a) {
		t.Errorf("generic placeholder %q", a)
	}
	checkContract(t, a)
	if c := k.Placeholder("DB_PASSWORD", "hunter2", 1); c == a {
		t.Errorf("ordinal 1 gives the same placeholder as ordinal 0: %q", c)
	}
	if c := SessionKey("session-key-2").Placeholder("DB_PASSWORD", "hunter2", 0); c == a {
		t.Errorf("another session key gives the same placeholder: %q", c)
	}
	if c := k.Placeholder("OTHER", "hunter2", 0); strings.TrimPrefix(c, "jail-secret-OTHER-") == strings.TrimPrefix(a, "jail-secret-DB_PASSWORD-") {
		t.Errorf("two names share the random part: %q %q", a, c)
	}
	gh := "ghp_" + strings.Repeat("a", 36)
	if k.Placeholder("X", gh, 0) != k.Placeholder("X", "ghp_"+strings.Repeat("b", 36), 0) {
		t.Errorf("shaped placeholders depend on the value beyond its format")
	}
	if p := k.Placeholder("ODD.NAME$x", "v", 0); !strings.HasPrefix(p, "jail-secret-ODD.NAME_x-") {
		t.Errorf("a name with bytes a placeholder may not hold: %q", p)
	}
	if n := NewSessionKey(); len(n) != 32 || n == NewSessionKey() {
		t.Errorf("session keys must be 32 fresh random bytes")
	}
}

// The same name and value get the same placeholder; another value of the
// same name another one.
func TestPlaceholdersRegistry(t *testing.T) {
	phs := NewPlaceholders("k")
	env, _ := phs.Mask("API_TOKEN", "from-env")
	again, _ := phs.Mask("API_TOKEN", "from-env")
	other, pieces := phs.Mask("API_TOKEN", "from-file")
	piece := pieces[0]
	if env != again {
		t.Errorf("same name and value: %q then %q", env, again)
	}
	if other == env || piece.Value != "from-file" || piece.Placeholder != other {
		t.Errorf("another value: %q (%+v), env's %q", other, piece, env)
	}
}

func TestSecretNames(t *testing.T) {
	for _, n := range []string{
		"PGPASSWORD", "MYSQL_PWD", "REDIS_PASSWORD", "DB_PASS", "LDAP_PASSWD", "ADMIN_PWD", "SENTRY_DSN", "APP_DSN",
		"AZURE_CREDENTIALS", "BASIC_AUTH", "JWT_PRIVATE_KEY", "COSIGN_SIGNING_KEY", "STRIPE_WEBHOOK_SECRET",
		"OAUTH_CLIENT_SECRET", "AZURE_STORAGE_CONNECTION_STRING", "DJANGO_SECRET_KEY", "MY_API_KEY", "db_password",
		"GPG_PASSPHRASE", "NPM_TOKEN", "DATABASE_URL",
	} {
		if !LooksSecret(n, "x") {
			t.Errorf("LooksSecret(%s) = false, want true", n)
		}
	}
	for _, n := range []string{
		"PATH", "PWD", "OLDPWD", "TERM", "HOME", "GOPATH", "LD_LIBRARY_PATH", "XAUTHORITY", "SHELL", "LANG",
		"EDITOR", "GOOGLE_APPLICATION_CREDENTIALS_FILE", "AWS_SHARED_CREDENTIALS_FILE", "SSL_CERT_DIR",
		"KEY_PATH", "PASSWORD_STORE_DIR", "COLORTERM", "DISPLAY", "PASS", "AUTH", "TOKEN_PATH", "BYPASS",
	} {
		if LooksSecret(n, "/some/ordinary/value") {
			t.Errorf("LooksSecret(%s) = true: not a secret", n)
		}
	}
}

func TestURLPassword(t *testing.T) {
	phs := NewPlaceholders("k")
	for _, c := range []struct{ name, value, pass, keep string }{
		{"DATABASE_URL", "postgres://app:s3cret@db:5432/app?sslmode=disable", "s3cret", "postgres://app:@db:5432/app?sslmode=disable"},
		{"REDIS_URL", "redis://:pw-only@cache:6379/0", "pw-only", "redis://:@cache:6379/0"},
		{"AMQP_URL", "amqp://u:p@h/vhost", "p", "amqp://u:@h/vhost"},
		{"MYSQL_URL", "mysql://root:p%40ss%2Fw@127.0.0.1:3306/db", "p@ss/w", "mysql://root:@127.0.0.1:3306/db"},
		{"GIT_REMOTE", "https://x-access-token:tok@git.example.test/o/r.git", "tok", "https://x-access-token:@git.example.test/o/r.git"},
		{"SENTRY_DSN", "https://0123abcd@o1.ingest.example.test/42", "0123abcd", "https://@o1.ingest.example.test/42"},
	} {
		if !LooksSecret(c.name, c.value) {
			t.Errorf("LooksSecret(%s, %q) = false", c.name, c.value)
		}
		masked, pieces := phs.Mask(c.name, c.value)
		piece := pieces[0]
		if piece.Value != c.pass || !strings.HasPrefix(piece.Placeholder, "jail-secret-"+c.name+"-") {
			t.Errorf("%s: the secret is %+v, want the password %q", c.name, piece, c.pass)
		}
		if strings.Replace(masked, piece.Placeholder, "", 1) != c.keep {
			t.Errorf("%s: masked %q, want %q around the placeholder", c.name, masked, c.keep)
		}
	}
	for _, v := range []string{"https://example.test/a", "postgres://app@db/app", "https://u:@h/", "not a url://x:y@z", "x:y@z"} {
		if urlPassword(v) != nil {
			t.Errorf("urlPassword(%q): want none", v)
		}
	}
	if LooksSecret("HOMEPAGE", "https://user@example.test/") {
		t.Errorf("a URL with a user and no password, under an ordinary name, is not a secret")
	}
}
