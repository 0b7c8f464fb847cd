package jail

import (
	"sort"
	"strings"
)

// secretNames are well-known variables that hold credentials.
var secretNames = map[string]bool{
	"ANTHROPIC_API_KEY": true, "OPENAI_API_KEY": true, "GEMINI_API_KEY": true, "GOOGLE_API_KEY": true,
	"GITHUB_TOKEN": true, "GH_TOKEN": true, "GITLAB_TOKEN": true, "GLAB_TOKEN": true,
	"AWS_SECRET_ACCESS_KEY": true, "AWS_SESSION_TOKEN": true, "AWS_ACCESS_KEY_ID": true,
	"NPM_TOKEN": true, "NODE_AUTH_TOKEN": true, "PYPI_TOKEN": true, "CARGO_REGISTRY_TOKEN": true,
	"HF_TOKEN": true, "HUGGING_FACE_HUB_TOKEN": true, "SLACK_TOKEN": true, "DATABASE_URL": true,
	"AZURE_CLIENT_SECRET": true, "GOOGLE_APPLICATION_CREDENTIALS": true, "DOCKER_AUTH_CONFIG": true,
	"PGPASSWORD": true, "MYSQL_PWD": true, "MYSQL_PASSWORD": true, "REDIS_PASSWORD": true,
	"SENTRY_DSN": true, "SENTRY_AUTH_TOKEN": true, "STRIPE_SECRET_KEY": true, "TWILIO_AUTH_TOKEN": true,
}

// secretSuffixes mark a variable as secret by the end of its name. Each
// starts with '_' so that PWD and OLDPWD (directories) are not taken for
// a *_PWD password; names ending in _PATH, _FILE or _DIR name files and
// are never secret by suffix.
var secretSuffixes = []string{
	"_API_KEY", "_APIKEY", "_TOKEN", "_SECRET", "_SECRET_KEY", "_CLIENT_SECRET", "_WEBHOOK_SECRET",
	"_PASSWORD", "_PASSWD", "_PASS", "_PWD", "_PASSPHRASE",
	"_ACCESS_KEY", "_PRIVATE_KEY", "_SIGNING_KEY", "_ENCRYPTION_KEY", "_MASTER_KEY",
	"_AUTH", "_CREDENTIALS", "_ACCESS_TOKEN", "_DSN", "_CONNECTION_STRING", "_CONN_STRING",
}

// notSecretSuffixes name files and directories, not their content.
var notSecretSuffixes = []string{"_PATH", "_FILE", "_DIR", "_HOME"}

// droppedEnv are host variables that point at host services the jail hides
// (agents, buses, runtime directories); passing them only confuses tools.
// The dynamic loaders' injection variables go too (and macOS's DYLD_*
// ones by prefix): a library they name would load into every program.
var droppedEnv = map[string]bool{
	"SSH_AUTH_SOCK": true, "SSH_AGENT_PID": true, "GPG_AGENT_INFO": true,
	"DBUS_SESSION_BUS_ADDRESS": true, "XDG_RUNTIME_DIR": true, "DOCKER_HOST": true,
	"LD_PRELOAD": true, "LD_LIBRARY_PATH": true, "LD_AUDIT": true,
}

// LooksSecret reports whether a variable holds a credential: by its
// name, by the format of its value (secretShapes), as a URL with a
// password, or inside a longer value (embeddedSecrets).
func LooksSecret(name, value string) bool {
	return secretName(name) || ShapeOf(value) != nil || urlPassword(value) != nil || len(embeddedSecrets(value)) > 0
}

// secretName reports whether a variable's name marks it as a credential.
func secretName(name string) bool {
	upper := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(name)) // a .env's stripe.secret-key

	if secretNames[upper] {
		return true
	}
	for _, s := range notSecretSuffixes {
		if strings.HasSuffix(upper, s) {
			return false
		}
	}
	base := nameBase(upper)
	for _, s := range secretSuffixes {
		if strings.HasSuffix(upper, s) || strings.HasSuffix(base, s) {
			return true
		}
	}
	return false
}

// nameQualifiers end the names of a credential's variants
// (STRIPE_SECRET_KEY_LIVE, DB_PASSWORD_OLD).
var nameQualifiers = []string{"_PROD", "_PRODUCTION", "_LIVE", "_DEV", "_STAGING", "_STAGE", "_TEST", "_OLD", "_NEW", "_BACKUP", "_PRIMARY", "_SECONDARY"}

// nameBase is an upper-case name without what numbers or qualifies a
// credential's variants: API_TOKEN2, API_TOKEN_2 and API_TOKEN_PROD_2
// are all API_TOKEN.
func nameBase(upper string) string {
	trim := func(s string) string { return strings.TrimSuffix(strings.TrimRight(s, "0123456789"), "_") }
	base := trim(upper)
	for _, q := range nameQualifiers {
		if b, ok := strings.CutSuffix(base, q); ok {
			return trim(b)
		}
	}
	return base
}

// EnvPlan is the jailed command's environment and what was masked.
type EnvPlan struct {
	Env          []string // NAME=value, sorted
	Placeholders []string // names whose values became placeholders
	Whole        []string // names the policy makes secret: masked whole
	Dropped      []string // names not passed at all
}

// PlanEnv builds the jailed command's environment from the host's: secrets
// become placeholders (unless env.pass names them), variables naming hidden
// host services are dropped, env.set is applied (with ~/ expanded as
// expandHome says, and ProjectToken), and jail's own variables (the proxy,
// the CA bundle) last. The placeholders are the session key's
// (SessionKey.Placeholder): prepareSecrets derives the same ones.
func PlanEnv(host []string, pol *Policy, key SessionKey, session string, jailVars map[string]string) EnvPlan {
	pass := map[string]bool{}
	for _, n := range pol.Env.Pass {
		pass[n] = true
	}
	forced := map[string]bool{}
	for _, n := range pol.SecretNames {
		forced[n] = true
	}
	for n := range pol.Secrets.Env {
		forced[n] = true
	}
	vars := map[string]string{}
	var ep EnvPlan
	ep.Whole = SortedKeys(forced)
	phs := NewPlaceholders(key, ep.Whole...)
	var pieces []SecretPiece
	var plain []string // kept as they are, so far
	for _, kv := range host {
		name, value, ok := strings.Cut(kv, "=")
		if _, dup := vars[name]; !ok || name == "" || dup {
			continue // a name twice: the first, as getenv reads it
		}
		switch {
		case droppedEnv[name] || strings.HasPrefix(name, "JAIL_") || strings.HasPrefix(name, "DYLD_"):
			ep.Dropped = append(ep.Dropped, name)
			continue
		case forced[name] || (!pass[name] && LooksSecret(name, value)):
			var found []SecretPiece
			value, found = phs.Mask(name, value)
			pieces = append(pieces, found...)
			ep.Placeholders = append(ep.Placeholders, name)
		case !pass[name]:
			plain = append(plain, name)
		}
		vars[name] = value
	}
	for _, name := range plain {
		vars[name] = MaskRepeated(vars[name], pieces)
	}
	home := vars["HOME"]
	for k, v := range pol.Env.Set {
		vars[k] = expandHome(expandProject(v, pol.ProjectRoot), home)
	}
	for k, v := range jailVars {
		vars[k] = v
	}
	vars["JAIL_SESSION"] = session
	if vars["PATH"] == "" {
		vars["PATH"] = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin"
	}
	for _, k := range SortedKeys(vars) {
		ep.Env = append(ep.Env, k+"="+vars[k])
	}
	sort.Strings(ep.Placeholders)
	sort.Strings(ep.Dropped)
	return ep
}

// minRepeated is the shortest secret value searched for in other values:
// a shorter one would match unrelated text.
const minRepeated = 8

// MaskRepeated replaces, in a value no rule took for a secret, every
// occurrence of a secret's value by its placeholder (the longest values
// first): a credential copied under an innocent name
// (BACKUP=<the API key>, CURL_FLAGS=-H "x-api-key: <it>") is still the
// credential.
func MaskRepeated(v string, pieces []SecretPiece) string {
	if len(pieces) == 0 || len(v) < minRepeated {
		return v
	}
	sorted := append([]SecretPiece(nil), pieces...)
	sort.SliceStable(sorted, func(i, j int) bool { return len(sorted[i].Value) > len(sorted[j].Value) })
	for _, p := range sorted {
		if len(p.Value) >= minRepeated {
			v = strings.ReplaceAll(v, p.Value, p.Placeholder)
		}
	}
	return v
}

// expandHome replaces "~/" with home's path where a shell assignment would:
// at the start of the value and after each ':' or '=', so that a profile
// can name a directory under the home in GOCACHE=~/.cache/jail/go-build or
// MAVEN_OPTS=-Dmaven.repo.local=~/.cache/jail/m2. Without an absolute home
// the value is kept as written.
func expandHome(v, home string) string {
	if !strings.HasPrefix(home, "/") || !strings.Contains(v, "~/") {
		return v
	}
	home = strings.TrimSuffix(home, "/")
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '~' && strings.HasPrefix(v[i+1:], "/") && (i == 0 || v[i-1] == ':' || v[i-1] == '=') {
			b.WriteString(home)
			continue
		}
		b.WriteByte(v[i])
	}
	return b.String()
}
