package jail

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/jailsh/jail/jail/jsonc"
	"github.com/jailsh/jail/profiles"
)

// jsonSchema is jail.schema.json decoded with encoding/json: a schema is a
// map[string]any, and $ref points into the root's $defs.
type jsonSchema struct {
	root map[string]any
}

func loadSchema(t *testing.T) jsonSchema {
	t.Helper()
	var root map[string]any
	if err := json.Unmarshal(Schema, &root); err != nil {
		t.Fatalf("jail.schema.json is not JSON: %v", err)
	}
	if got, want := root["$schema"], "https://json-schema.org/draft/2020-12/schema"; got != want {
		t.Errorf("$schema = %v, want %s", got, want)
	}
	if id, _ := root["$id"].(string); !strings.HasPrefix(id, "https://jail.invalid/") {
		t.Errorf("$id = %q, want a URL under https://jail.invalid/ (no real host)", id)
	}
	return jsonSchema{root: root}
}

// resolve follows $ref ("#/$defs/NAME") until it reaches a schema without one.
func (js jsonSchema) resolve(s map[string]any) (map[string]any, error) {
	for i := 0; i < 8; i++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s, nil
		}
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		defs, _ := js.root["$defs"].(map[string]any)
		next, found := defs[name].(map[string]any)
		if !ok || !found {
			return nil, fmt.Errorf("unresolvable $ref %q", ref)
		}
		s = next
	}
	return nil, fmt.Errorf("$ref loop")
}

// TestSchemaMatchesConfig walks Config by reflection beside the schema: at
// every level the schema's property names are exactly the struct's json tags
// (so a field added to one and not the other fails here), objects refuse
// additional properties as the parser refuses unknown keys, and the types
// agree (string, list of strings, object, map of names to values).
func TestSchemaMatchesConfig(t *testing.T) {
	js := loadSchema(t)
	js.matchType(t, "(root)", js.root, reflect.TypeOf(Config{}))
}

func (js jsonSchema) matchType(t *testing.T, path string, s map[string]any, typ reflect.Type) {
	t.Helper()
	s, err := js.resolve(s)
	if err != nil {
		t.Errorf("%s: %v", path, err)
		return
	}
	if path != "(root)" {
		if d, _ := s["description"].(string); d == "" {
			// Nested item schemas may do without; properties may not.
			if !strings.HasSuffix(path, "[]") && !strings.HasSuffix(path, "{}") {
				t.Errorf("%s: no description", path)
			}
		}
	}
	if branches, ok := s["anyOf"].([]any); ok {
		js.matchShortForm(t, path, branches, typ)
		return
	}
	want := map[reflect.Kind]string{reflect.Struct: "object", reflect.Map: "object", reflect.Slice: "array", reflect.String: "string", reflect.Int: "integer"}[typ.Kind()]
	if want == "" {
		t.Errorf("%s: Go type %s has no schema mapping; extend this test", path, typ)
		return
	}
	if got := s["type"]; got != want {
		t.Errorf("%s: schema type %v, Go type %s wants %q", path, got, typ, want)
		return
	}
	switch typ.Kind() {
	case reflect.Struct:
		if s["additionalProperties"] != false {
			t.Errorf("%s: additionalProperties must be false (the parser refuses unknown keys)", path)
		}
		props, _ := s["properties"].(map[string]any)
		fields := map[string]reflect.Type{}
		for i := 0; i < typ.NumField(); i++ {
			f := typ.Field(i)
			if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag != "-" {
				fields[tag] = f.Type
			}
		}
		for name := range fields {
			if _, ok := props[name]; !ok {
				t.Errorf("%s: Go field with json tag %q is missing from the schema", path, name)
			}
		}
		for _, name := range schemaKeys(props) {
			ft, ok := fields[name]
			if !ok {
				t.Errorf("%s: schema property %q has no Go field in %s", path, name, typ)
				continue
			}
			sub, _ := props[name].(map[string]any)
			js.matchType(t, schemaJoin(path, name), sub, ft)
		}
	case reflect.Slice:
		items, _ := s["items"].(map[string]any)
		js.matchType(t, path+"[]", items, typ.Elem())
	case reflect.Map:
		if typ.Key().Kind() != reflect.String {
			t.Errorf("%s: map key type %s", path, typ.Key())
		}
		if _, ok := s["properties"]; ok {
			t.Errorf("%s: a map's schema must not list properties", path)
		}
		elem, ok := s["additionalProperties"].(map[string]any)
		if !ok {
			t.Errorf("%s: a map's schema needs additionalProperties as a schema", path)
			return
		}
		js.matchType(t, path+"{}", elem, typ.Elem())
	}
}

// matchShortForm holds an anyOf to the one Go type the parser accepts in
// two forms, a struct written as an object or, shorter, as a list that
// fills its first field (a secrets.env binding: {"hosts": [...], ...} or
// [...]): an object branch matching the struct and an array branch
// matching that field.
func (js jsonSchema) matchShortForm(t *testing.T, path string, branches []any, typ reflect.Type) {
	t.Helper()
	if typ != reflect.TypeOf(SecretEnv{}) || len(branches) != 2 {
		t.Errorf("%s: anyOf is only for SecretEnv's two forms, got %d branches for %s", path, len(branches), typ)
		return
	}
	for _, b := range branches {
		b, _ := b.(map[string]any)
		switch b["type"] {
		case "object":
			js.matchType(t, path, b, typ)
		case "array":
			js.matchType(t, path, b, typ.Field(0).Type)
		default:
			t.Errorf("%s: anyOf branch of type %v", path, b["type"])
		}
	}
}

func schemaJoin(path, name string) string {
	if path == "(root)" {
		return name
	}
	return path + "." + name
}

func schemaKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// validate is a minimal JSON Schema validator for the keywords
// jail.schema.json uses; an unknown keyword is an error so that the schema
// cannot grow a constraint this test silently ignores.
func (js jsonSchema) validate(s map[string]any, n *jsonc.Node, path string) error {
	s, err := js.resolve(s)
	if err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	for k := range s {
		switch k {
		case "$schema", "$id", "$defs", "title", "description",
			"type", "properties", "additionalProperties", "propertyNames", "items", "enum", "pattern", "anyOf":
		default:
			return fmt.Errorf("%s: schema keyword %q is not supported by the test validator", path, k)
		}
	}
	if branches, ok := s["anyOf"].([]any); ok {
		var first error
		for _, b := range branches {
			b, _ := b.(map[string]any)
			err := js.validate(b, n, path)
			if err == nil {
				first = nil
				break
			}
			if first == nil {
				first = err
			}
		}
		if first != nil {
			return fmt.Errorf("%s: matches no branch of anyOf: %v", path, first)
		}
	}
	if typ, ok := s["type"].(string); ok {
		want := map[string]jsonc.Kind{"string": jsonc.String, "array": jsonc.Array, "object": jsonc.Object}[typ]
		if want == jsonc.Null || n.Kind != want {
			return fmt.Errorf("%s: %s, want %s", path, n.Kind, typ)
		}
	}
	if enum, ok := s["enum"].([]any); ok {
		found := false
		for _, e := range enum {
			if str, ok := e.(string); ok && n.Kind == jsonc.String && n.Str == str {
				found = true
			}
		}
		if !found {
			return fmt.Errorf("%s: %q is not one of %v", path, n.Str, enum)
		}
	}
	if pat, ok := s["pattern"].(string); ok && n.Kind == jsonc.String {
		if err := schemaMatchPattern(pat, n.Str); err != nil {
			return fmt.Errorf("%s: %v", path, err)
		}
	}
	if items, ok := s["items"].(map[string]any); ok && n.Kind == jsonc.Array {
		for i, it := range n.Items {
			if err := js.validate(items, it, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	if n.Kind == jsonc.Object {
		props, _ := s["properties"].(map[string]any)
		names, _ := s["propertyNames"].(map[string]any)
		for _, m := range n.Members {
			p := schemaJoin(path, m.Key)
			if names != nil {
				if err := js.validate(names, &jsonc.Node{Kind: jsonc.String, Str: m.Key}, p+" (name)"); err != nil {
					return err
				}
			}
			if sub, ok := props[m.Key].(map[string]any); ok {
				if err := js.validate(sub, m.Value, p); err != nil {
					return err
				}
				continue
			}
			switch ap := s["additionalProperties"].(type) {
			case bool:
				if !ap {
					return fmt.Errorf("%s: additional property %q", path, m.Key)
				}
			case map[string]any:
				if err := js.validate(ap, m.Value, p); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

var schemaPatternCache = map[string]*regexp.Regexp{}

// schemaMatchPattern applies a schema pattern. The patterns are written in the
// common subset of ECMA-262 and Go RE2 syntax, so Go can run them.
func schemaMatchPattern(pat, s string) error {
	re, ok := schemaPatternCache[pat]
	if !ok {
		var err error
		if re, err = regexp.Compile(pat); err != nil {
			return fmt.Errorf("pattern %q does not compile: %v", pat, err)
		}
		schemaPatternCache[pat] = re
	}
	if !re.MatchString(s) {
		return fmt.Errorf("%q does not match %s", s, pat)
	}
	return nil
}

// schemaCorpus is every built-in profile, every FuzzParseConfig seed, and
// documents aimed at each rule of ParseConfig.
func schemaCorpus(t *testing.T) map[string][]byte {
	t.Helper()
	docs := map[string][]byte{}
	names, err := fs.Glob(profiles.FS, "*.json")
	if err != nil || len(names) == 0 {
		t.Fatalf("no built-in profiles: %v", err)
	}
	for _, name := range names {
		data, err := fs.ReadFile(profiles.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		docs["profile "+name] = data
	}
	seeds, err := filepath.Glob(filepath.Join("testdata", "fuzz", "FuzzParseConfig", "*"))
	if err != nil || len(seeds) == 0 {
		t.Fatalf("no FuzzParseConfig seeds: %v", err)
	}
	for _, path := range seeds {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		docs["seed "+filepath.Base(path)] = schemaFuzzSeed(t, path, raw)
	}
	for i, doc := range []string{
		specExampleJSONC,
		usersOneLiner,
		`{"$schema": "https://jail.invalid/jail.schema.json", "extends": ["node"]}`,
		`{"description": "x"}`,
		// Unknown keys, at every level.
		`{"foo": 1}`,
		`{"network": {"allowed": []}}`,
		`{"filesystem": {"allow_write": ["."]}}`,
		`{"secrets": {"environment": {}}}`,
		`{"command": {"block": []}}`,
		`{"env": {"unset": []}}`,
		// Types.
		`[]`,
		`{"extends": "node"}`,
		`{"extends": [1]}`,
		`{"filesystem": []}`,
		`{"filesystem": {"allowRead": null}}`,
		`{"network": {"unknown": true}}`,
		`{"network": {"hosts": []}}`,
		`{"network": {"hosts": {"a.test": 1}}}`,
		`{"secrets": {"env": {"K": "a.com"}}}`,
		`{"secrets": {"env": {"K": [1]}}}`,
		`{"env": {"set": {"A": 1}}}`,
		`{"$schema": 1}`,
		`{"description": []}`,
		// Values.
		`{"network": {"unknown": "deny"}}`,
		`{"network": {"unknown": "allow"}}`,
		`{"network": {"unknown": "ask"}}`,
		`{"network": {"unknown": "Deny"}}`,
		`{"extends": ["a/b"]}`,
		`{"extends": ["a\\b"]}`,
		`{"extends": [""]}`,
		`{"filesystem": {"allowRead": [" "]}}`,
		`{"filesystem": {"allowRead": ["\t\u00a0\u3000"]}}`,
		`{"filesystem": {"allowRead": ["a\u0000b"]}}`,
		`{"filesystem": {"allowRead": [" a "]}}`,
		`{"command": {"deny": ["git push"], "allow": []}}`,
		`{"env": {"pass": ["TERM", "_X1"]}}`,
		`{"env": {"pass": ["1X"]}}`,
		`{"env": {"pass": ["A-B"]}}`,
		`{"env": {"set": {"A B": "1"}}}`,
		`{"env": {"set": {"A": ""}}}`,
		`{"env": {"set": {"A": "a\u0000"}}}`,
		`{"secrets": {"env": {"K_TOKEN": ["a.com", "*.b.com:443"], "_E": []}}}`,
		`{"secrets": {"env": {"9K": ["a.com"]}}}`,
		`{"secrets": {"env": {"K": ["a.com:0"]}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"], "inject": ["header:x-api-key", "header:Authorization", "query:key", "query", "path", "body", "header"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"]}}}}`,
		`{"secrets": {"env": {"K": {}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"], "inject": ["cookie"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"], "inject": ["header:"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"], "inject": ["header:a b"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"], "inject": ["query:a&b"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"], "inject": ["body:x"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a.com"], "inject": "body"}}}}`,
		`{"secrets": {"env": {"K": {"host": ["a.com"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": ["a b"]}}}}`,
		`{"secrets": {"env": {"K": {"hosts": "a.com"}}}}`,
		`{"network": {"hosts": {"a.test": "127.0.0.1:8443"}}}`,
		`{"network": {"hosts": {"a.test": "127.0.0.1"}}}`,
		`{"network": {"hosts": {"a.test": "[::1]"}}}`,
		`{"network": {"hosts": {"a.test": "[::1]:443"}}}`,
		`{"network": {"hosts": {"*.a.test": "127.0.0.1:1"}}}`,
		`{"network": {"hosts": {"a.test:80": "127.0.0.1:1"}}}`,
		`{"network": {"hosts": {"a test": "127.0.0.1:1"}}}`,
	} {
		docs[fmt.Sprintf("doc %d", i)] = []byte(doc)
	}
	// Domains, each in every list that holds them.
	for _, dom := range []string{
		"a.com", "*.a.com", "a.com:443", "a.com:1", "a.com:65535", "a.com:0080", "[::1]:8080", "[::1]", "::1",
		"localhost", "xn--bcher-kva.example", "bücher.example", "a]:80", "a:80]", "]", "*.]",
		"", " ", "*", "*.", "*.*.a.com", "a*.com", "a.com:0", "a.com:65536", "a.com:", "a.com:b", "a.com:+80",
		"a.com:-1", ":80", "*.:80", "a b.com", "a/b", "a?b", "user@a.com", "a\u007f.com", "a\tb", "https://a.com",
	} {
		q, _ := json.Marshal(dom)
		for _, list := range []string{"allow", "deny", "passthrough"} {
			docs["domain "+list+" "+string(q)] = []byte(fmt.Sprintf(`{"network": {%q: [%s]}}`, list, q))
		}
		docs["domain secrets "+string(q)] = []byte(fmt.Sprintf(`{"secrets": {"env": {"K": [%s]}}}`, q))
		docs["domain hosts key "+string(q)] = []byte(fmt.Sprintf(`{"network": {"hosts": {%s: "127.0.0.1:1"}}}`, q))
		docs["domain hosts value "+string(q)] = []byte(fmt.Sprintf(`{"network": {"hosts": {"a.test": %s}}}`, q))
	}
	return docs
}

// schemaFuzzSeed decodes a "go test fuzz v1" file holding one []byte.
func schemaFuzzSeed(t *testing.T, path string, raw []byte) []byte {
	t.Helper()
	header, body, _ := strings.Cut(string(raw), "\n")
	body = strings.TrimSpace(body)
	lit, ok := strings.CutPrefix(body, "[]byte(")
	lit, ok2 := strings.CutSuffix(lit, ")")
	if header != "go test fuzz v1" || !ok || !ok2 {
		t.Fatalf("%s: not a one-[]byte fuzz seed", path)
	}
	s, err := strconv.Unquote(lit)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return []byte(s)
}

// TestSchemaAgreesWithParser: every document of the corpus that ParseConfig
// accepts validates against the schema (so editors never flag a good file),
// and every document that is well-formed JSON but that ParseConfig refuses is
// refused by the schema too (an unknown key, a wrong type, a bad value).
// Syntax errors and duplicate keys are the parser's alone.
func TestSchemaAgreesWithParser(t *testing.T) {
	js := loadSchema(t)
	docs := schemaCorpus(t)
	accepted, refused := 0, 0
	for _, name := range schemaDocNames(docs) {
		data := docs[name]
		_, perr := ParseConfig(data, "jail.json")
		root, jerr := jsonc.Parse(data)
		if jerr != nil {
			if perr == nil {
				t.Errorf("%s: ParseConfig accepted a document parseJSONC refuses: %v", name, jerr)
			}
			continue
		}
		serr := js.validate(js.root, root, "(root)")
		switch {
		case perr == nil && serr != nil:
			t.Errorf("%s: ParseConfig accepts %q but the schema refuses it: %v", name, data, serr)
		case perr != nil && serr == nil:
			t.Errorf("%s: ParseConfig refuses %q (%v) but the schema accepts it", name, data, perr)
		case perr == nil:
			accepted++
		default:
			refused++
		}
		if strings.HasPrefix(name, "profile ") && perr != nil {
			t.Errorf("built-in %s does not parse: %v", name, perr)
		}
	}
	if accepted < 20 || refused < 20 {
		t.Errorf("corpus too thin: %d accepted, %d refused", accepted, refused)
	}
}

// TestSchemaRefusesUnknownKey is the headline case spelled out: a key the
// parser does not know fails both, at the top level and nested.
func TestSchemaRefusesUnknownKey(t *testing.T) {
	js := loadSchema(t)
	for _, doc := range []string{`{"filesytem": {}}`, `{"network": {"unknown": "deny", "proxy": "x"}}`} {
		if _, err := ParseConfig([]byte(doc), "jail.json"); err == nil || !strings.Contains(err.Error(), "unknown key") {
			t.Errorf("ParseConfig(%s) = %v, want an unknown-key error", doc, err)
		}
		root, err := jsonc.Parse([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		if err := js.validate(js.root, root, "(root)"); err == nil || !strings.Contains(err.Error(), "additional property") {
			t.Errorf("schema validation of %s = %v, want an additional-property error", doc, err)
		}
	}
}

func schemaDocNames(docs map[string][]byte) []string {
	names := make([]string, 0, len(docs))
	for k := range docs {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
