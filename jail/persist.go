package jail

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jailsh/jail/jail/jsonc"
	"github.com/jailsh/jail/proxy"
)

// persistKeys are the lists an answer may be persisted to.
var persistKeys = map[string]bool{"network.allow": true, "network.deny": true}

// PersistRule adds value to the list at key ("network.allow",
// "network.deny") of the config file at path by a minimal edit that keeps
// its comments and formatting, creating the file when it is missing. For a
// project's jail.json (project set) the file must be trusted as it is now,
// or widen nothing, and the new content is then recorded as trusted: the
// person who answered is the one who widens it.
//
// An entry already in the list leaves the file as it is. A path that is a
// symlink, or not a regular file, is refused: the write must not land
// where the link points, outside the project. The file is replaced
// atomically and keeps its mode.
func PersistRule(path, key, value string, project bool, home string, getenv func(string) string) error {
	if !persistKeys[key] {
		return fmt.Errorf("persisting a rule: %q is not a list an answer may go to (network.allow or network.deny)", key)
	}
	if err := checkDomain(value); err != nil || strings.ContainsRune(value, 0) {
		return fmt.Errorf("persisting a rule: %s entry %q is not a domain", key, value)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("persisting a rule: %w", err)
	}
	fresh := os.FileMode(0o600) // the user's own config
	if project {
		fresh = 0o644 // a file the team commits
	}
	data, mode, err := readPersisted(abs, fresh)
	if err != nil {
		return err
	}
	if project && data != nil {
		if err := trustedAsItIs(abs, data, home, getenv); err != nil {
			return err
		}
	}
	out, err := appendRule(data, key, value)
	if err != nil {
		return fmt.Errorf("persisting a rule in %s: %w", abs, err)
	}
	if data != nil && bytes.Equal(out, data) {
		return nil
	}
	if _, err := ParseConfig(out, abs); err != nil {
		return fmt.Errorf("persisting a rule in %s: the edit would not parse: %w", abs, err)
	}
	if err := proxy.WriteFileAtomic(abs, out, mode); err != nil {
		return fmt.Errorf("persisting a rule: %w", err)
	}
	if project {
		if err := Trust(abs, ContentHash(out), home, getenv); err != nil {
			return fmt.Errorf("persisting a rule: recording trust of %s: %w", abs, err)
		}
	}
	return nil
}

// readPersisted reads the config file at path without following a
// symlink, and its mode: nil data and the mode fresh when it is missing.
func readPersisted(path string, fresh os.FileMode) ([]byte, os.FileMode, error) {
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fresh, nil
	case err != nil:
		return nil, 0, fmt.Errorf("persisting a rule: %w", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, 0, fmt.Errorf("persisting a rule: %s is a symlink; refusing to write through it (replace it with the file itself)", path)
	}
	data, err := readBounded(path, maxConfigSize, syscall.O_NOFOLLOW)
	if err != nil {
		return nil, 0, fmt.Errorf("persisting a rule: %w", err)
	}
	return data, fi.Mode().Perm(), nil
}

// trustedAsItIs refuses a project config whose content as it is now
// widens the jail without the user's trust: writing it, and trusting the
// result, would trust what the user never saw.
func trustedAsItIs(path string, data []byte, home string, getenv func(string) string) error {
	c, err := ParseConfig(data, path)
	if err != nil {
		return fmt.Errorf("persisting a rule: %w", err)
	}
	c.File, c.Dir, c.Hash, c.Project = path, filepath.Dir(path), ContentHash(data), true
	if IsTrusted(c, home, getenv) || len(Widening(c, c.Dir, home)) == 0 {
		return nil
	}
	return fmt.Errorf("persisting a rule: %s has changes you have not trusted; run jail trust first", path)
}

// appendRule is data with value added to the list at key; a fresh
// document when data is nil or blank.
func appendRule(data []byte, key, value string) ([]byte, error) {
	path := strings.Split(key, ".")
	if strings.TrimSpace(string(data)) == "" {
		doc := map[string]any{path[0]: map[string][]string{path[1]: {value}}}
		b, err := json.MarshalIndent(doc, "", "  ")
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	}
	return jsonc.AppendStrings(data, jsonc.Append{Path: path, Vals: []string{value}})
}
