package linux

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/proxy"
)

// maxSignInFile bounds a sign-in file read: a few tokens and their
// metadata.
const maxSignInFile = 1 << 20

// prepareSignIn writes the session copy of each sign-in file, its tokens
// replaced by placeholders, and returns the tokens as secrets.
func prepareSignIn(plan *Plan) ([]proxy.Secret, error) {
	var out []proxy.Secret
	for i, sf := range plan.SignIn {
		if sf.Missing {
			continue
		}
		secrets, rules, err := copySignInFile(plan.SecretKey, sf)
		if err != nil {
			return nil, err
		}
		plan.SignIn[i].Rules = rules
		out = append(out, secrets...)
	}
	return out, nil
}

// copySignInFile writes sf's session copy and returns its secrets and
// the rules its tokens were taken by (expandSignInRule).
func copySignInFile(key jail.SessionKey, sf jail.SignInFile) ([]proxy.Secret, []jail.SignInRule, error) {
	for _, d := range []string{filepath.Dir(filepath.Dir(sf.Copy)), filepath.Dir(sf.Copy)} {
		if err := ensurePrivateDir(d); err != nil {
			return nil, nil, err
		}
	}
	raw, err := jail.ReadBounded(sf.Host, maxSignInFile)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the sign-in file %s: %w; make it readable or remove it", sf.Host, err)
	}
	doc, err := decodeJSONObject(signInJSON(sf.Rule.Format, raw))
	if err != nil {
		return nil, nil, fmt.Errorf("the sign-in file %s is not a JSON object (%v); sign in again or remove it", sf.Host, err)
	}
	rules := expandSignInRule(sf.Rule, doc)
	var out []proxy.Secret
	for _, r := range rules {
		for _, tok := range r.Tokens {
			v, _ := lookupString(doc, tok.Path)
			if v == "" || !signInSecret(r.Format, v) {
				continue
			}
			ph := jail.SignInPlaceholder(key, r, tok.Name, v, 0)
			setString(doc, tok.Path, ph)
			out = append(out, proxy.Secret{Name: tok.Name, Placeholder: ph, Value: v, Hosts: tok.Hosts, Inject: tok.Inject, Paths: tokenPaths(r, tok)})
		}
	}
	copy, err := encodeJSON(doc)
	if err != nil {
		return nil, nil, fmt.Errorf("writing the session copy of %s: %w", sf.Host, err)
	}
	for _, s := range out {
		if bytes.Contains(copy, []byte(s.Value)) { // the same token under another key
			return nil, nil, fmt.Errorf("the sign-in file %s holds its %s outside %s too; sign in again to rewrite it", sf.Host, s.Name, strings.Join(tokenPath(rules, s.Name), "."))
		}
	}
	if err := os.WriteFile(sf.Copy, copy, 0o600); err != nil {
		return nil, nil, fmt.Errorf("writing the session copy of %s: %w", sf.Host, err)
	}
	return out, rules, nil
}

func tokenPath(rules []jail.SignInRule, name string) []string {
	for _, r := range rules {
		for _, t := range r.Tokens {
			if t.Name == name {
				return t.Path
			}
		}
	}
	return nil
}

// signInEndpoints are the token endpoints of the plan's sign-in files:
// the proxy mints a new placeholder for each new token and Save writes
// the real tokens into the host file.
func signInEndpoints(plan *Plan) ([]proxy.TokenEndpoint, []*signInState) {
	var out []proxy.TokenEndpoint
	var states []*signInState
	for _, sf := range plan.SignIn {
		rules := sf.Rules
		if rules == nil {
			rules = []jail.SignInRule{sf.Rule}
		}
		mu := &sync.Mutex{} // one host file, written by each rule's state
		for _, r := range rules {
			if r.EndpointHost == "" { // a keyed file's provider without OAuth
				continue
			}
			f := sf
			f.Rule = r
			st := &signInState{file: f, key: plan.SecretKey, mu: mu, ord: map[string]int{}, minted: map[string]bool{}}
			states = append(states, st)
			out = append(out, proxy.TokenEndpoint{Host: r.EndpointHost, Path: r.EndpointPath,
				Tokens: answerTokens(r), Carrying: refreshName(r), Mint: st.mint, Save: st.save, Login: st.login})
			for _, is := range r.Issued {
				out = append(out, proxy.TokenEndpoint{Host: is.Host, Path: is.Path, Mint: st.mint,
					Tokens: map[string]proxy.TokenSecret{is.Token.Field: {Name: is.Token.Name, Hosts: is.Token.Hosts, Inject: is.Token.Inject}}})
			}
		}
	}
	return out, states
}

// tokenPaths are the URL paths a token is injected at: a refresh token's
// only at its token endpoint; others wherever their hosts take them.
func tokenPaths(r jail.SignInRule, t jail.SignInToken) []string {
	if t.Field == "refresh_token" && r.EndpointPath != "" {
		return []string{r.EndpointPath}
	}
	return nil
}

// answerTokens maps the token answer fields of r's tokens to their
// secrets.
func answerTokens(r jail.SignInRule) map[string]proxy.TokenSecret {
	tokens := map[string]proxy.TokenSecret{}
	for _, t := range r.Tokens {
		if t.Field == "" { // no token answer carries it
			continue
		}
		tokens[t.Field] = proxy.TokenSecret{Name: t.Name, Hosts: t.Hosts, Inject: t.Inject, Paths: tokenPaths(r, t)}
	}
	return tokens
}

// refreshName is the name of the secret of a rule's refresh token: the
// one the token endpoint's answers are taken for.
func refreshName(r jail.SignInRule) string {
	for _, t := range r.Tokens {
		if t.Field == "refresh_token" {
			return t.Name
		}
	}
	return ""
}

// signInState is one sign-in file's tokens minted in a session.
type signInState struct {
	file   jail.SignInFile
	key    jail.SessionKey
	mu     *sync.Mutex     // the host file's: shared by the states of one file
	ord    map[string]int  // the last ordinal minted per secret name
	minted map[string]bool // placeholders minted
	// pending is the last answer to a sign-in made inside, with the real
	// tokens, kept until the command ends.
	pending map[string]any
	logins  int // sign-ins made inside: with more than one, which is the person's is unknown
}

// mint returns a new placeholder for a new value of field: the session
// key's, at the name's next ordinal (0 is the file's own token).
func (st *signInState) mint(field, value string) string {
	st.mu.Lock()
	defer st.mu.Unlock()
	name := field
	for _, t := range st.file.Rule.Tokens {
		if t.Field == field {
			name = t.Name
		}
	}
	for _, is := range st.file.Rule.Issued {
		if is.Token.Field == field {
			name = is.Token.Name
		}
	}
	st.ord[name]++
	ph := jail.SignInPlaceholder(st.key, st.file.Rule, name, value, st.ord[name])
	st.minted[ph] = true
	return ph
}

// save writes the answer's real tokens into the host file, keeping its
// other fields: atomically, mode 0600. A value that is a placeholder is
// never written.
func (st *signInState) save(answer map[string]any) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	raw, err := jail.ReadBounded(st.file.Host, maxSignInFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reading %s: %w", st.file.Host, err)
	}
	doc := map[string]any{}
	if len(raw) > 0 {
		if doc, err = decodeJSONObject(signInJSON(st.file.Rule.Format, raw)); err != nil {
			return fmt.Errorf("%s is no longer a JSON object: %w", st.file.Host, err)
		}
	}
	changed := false
	for _, t := range st.file.Rule.Tokens {
		v, ok := answer[t.Field].(string)
		if !ok || v == "" {
			continue
		}
		if st.minted[v] || strings.Contains(v, "jail") && placeholderShaped(v) {
			return fmt.Errorf("the token endpoint answered a placeholder as %s", t.Field)
		}
		setString(doc, t.Path, v)
		changed = true
	}
	if !changed {
		return nil
	}
	signInMeta(st.file.Rule, doc, answer, time.Now())
	b, err := encodeJSON(doc)
	if err != nil {
		return err
	}
	if st.file.InPlace {
		return writeInPlace(st.file.Host, b)
	}
	// A rename, as the agent itself saves it outside the jail: no mount of
	// the jail hangs on the host file's name (the copy lies in a session
	// view, or is bound over a name of the throwaway home), and the temporary
	// file beside it is not in the jail's view.
	return proxy.WriteFileAtomic(st.file.Host, b, 0o600)
}

// writeInPlace rewrites path's content in place, mode 0600, and syncs
// it: for a copy bound over the host file's name (no session view), where
// a rename over that name would detach the bind inside (the kernel drops
// mounts on a replaced name in every namespace), showing the jail the
// real file. No spare copy beside it either: the directory is the jail's
// to read.
func writeInPlace(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer f.Close()
	for _, step := range []func() error{
		func() error { return f.Chmod(0o600) },
		func() error { return f.Truncate(0) },
		func() error { _, err := f.WriteAt(b, 0); return err },
		f.Sync,
	} {
		if err := step(); err != nil {
			return fmt.Errorf("writing %s: %w", path, err)
		}
	}
	return nil
}

func decodeJSONObject(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	if m == nil {
		return nil, errors.New("null")
	}
	return m, nil
}

func encodeJSON(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// lookupString returns the string at path in doc.
func lookupString(doc map[string]any, path []string) (string, bool) {
	cur, _ := jsonAt(doc, path)
	s, ok := cur.(string)
	return s, ok
}

// setString sets the string at path in doc, making the objects on the
// way; where the path's parent is an array, the last key is an index in
// it.
func setString(doc map[string]any, path []string, v string) {
	last := path[len(path)-1]
	switch parent, _ := jsonAt(doc, path[:len(path)-1]); p := parent.(type) {
	case []any:
		if i, err := strconv.Atoi(last); err == nil && i >= 0 && i < len(p) {
			p[i] = v
		}
		return
	case map[string]any:
		p[last] = v
		return
	}
	m := doc
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[last] = v
}

// placeholderShaped reports whether v is made only of the bytes of a
// placeholder and carries its marker where a jail placeholder does.
func placeholderShaped(v string) bool {
	return strings.HasPrefix(v, proxy.PlaceholderPrefix) || strings.Contains(v, "-jail") || strings.Contains(v, ".jail")
}
