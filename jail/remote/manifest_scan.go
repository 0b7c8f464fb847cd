package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/jailsh/jail/jail"
	"github.com/jailsh/jail/jail/credstores"
)

// maxScan bounds the entries a project scan looks at.
const maxScan = 500000

// Why a local entry is not sent as it is.
const (
	sendPlain  = ""
	sendMasked = "masked"  // its masked copy goes instead
	sendDenied = "denied"  // a denied file, or another name of one: not sent
	sendSecret = "secret"  // a masked file with no masked copy: not sent
	sendLinked = "linked"  // another name of a masked file: not sent
	sendOther  = "special" // a device, socket or fifo: not sent
	sendUnread = "unreadable"
)

// localEntry is a project entry as the scan found it.
type localEntry struct {
	ManifestEntry
	abs     string
	why     string // one of the send* reasons
	content []byte // the masked copy, for sendMasked
	inode   [2]uint64
	nlink   uint64
}

// sent reports whether the entry reaches the remote.
func (e *localEntry) sent() bool { return e.why == sendPlain || e.why == sendMasked }

// secretRules tell, by absolute path, which project files are masked and
// which are denied, as the local jail tells them.
type secretRules struct {
	secret, denied       []string
	root, home, stateDir string
}

func newSecretRules(pol *jail.Policy, home, stateDir string) *secretRules {
	return &secretRules{
		secret: jail.SecretFiles(pol), denied: jail.DeniedPatterns(pol, home, "", stateDir),
		root: pol.ProjectRoot, home: home, stateDir: stateDir,
	}
}

func (r *secretRules) isSecret(abs string) bool { return matchesOrUnder(r.secret, abs) }
func (r *secretRules) isDenied(abs string) bool { return matchesOrUnder(r.denied, abs) }

// matchesOrUnder reports whether path, or a directory above it, matches
// one of the absolute patterns (a literal pattern names its tree).
func matchesOrUnder(patterns []string, path string) bool {
	for _, pat := range patterns {
		pat = strings.TrimSuffix(pat, "/")
		if !jail.HasMeta(pat) {
			if jail.Under(path, pat) {
				return true
			}
			continue
		}
		for p := path; ; p = filepath.Dir(p) {
			if jail.MatchPath(pat, p) {
				return true
			}
			if p == "/" || p == "." {
				break
			}
		}
	}
	return false
}

// scan lists the project at root: every directory, regular file and
// symlink (never followed), each with why it is not sent as it is. old
// lends the digests of files unchanged since it was made.
func scan(root string, rules *secretRules, mask MaskFunc, old *Manifest) (map[string]*localEntry, error) {
	out := map[string]*localEntry{}
	maskedLinks, deniedLinks := map[string]bool{}, map[string]bool{}
	n := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil && path == root {
			return fmt.Errorf("scanning the project: %w", err)
		}
		if path == root {
			return nil
		}
		if err != nil { // this user cannot read it: neither can the jail
			rel := filepath.ToSlash(path[len(root)+1:])
			if e := out[rel]; e != nil {
				e.why = sendUnread
			} else {
				out[rel] = &localEntry{abs: path, why: sendUnread, ManifestEntry: ManifestEntry{Path: rel, Type: "special"}}
			}
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if n++; n > maxScan {
			return fmt.Errorf("scanning the project: more than %d entries", maxScan)
		}
		rel := filepath.ToSlash(path[len(root)+1:])
		e, err := scanEntry(path, rel, d)
		if err != nil {
			return err
		}
		out[rel] = e
		switch {
		case e.Type == "dir" && rules.isDenied(path):
			e.why = sendDenied // walked still: the names of its files are looked for elsewhere
		case e.Type == "link":
			noteLinkTarget(root, path, rules, maskedLinks, deniedLinks)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	classifyEntries(root, out, rules, maskedLinks, deniedLinks)
	fill(out, mask, old)
	return out, nil
}

// scanEntry is one walked entry, its kind and metadata.
func scanEntry(path, rel string, d fs.DirEntry) (*localEntry, error) {
	fi, err := d.Info()
	if err != nil {
		return nil, fmt.Errorf("scanning the project: %w", err)
	}
	e := &localEntry{abs: path, ManifestEntry: ManifestEntry{Path: rel, Mode: uint32(fi.Mode().Perm()), MTime: fi.ModTime().UnixNano()}}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		e.inode, e.nlink = [2]uint64{uint64(st.Dev), uint64(st.Ino)}, uint64(st.Nlink)
		e.Ino, e.CTime = uint64(st.Ino), ctimeOf(st)
	}
	switch {
	case fi.IsDir():
		e.Type = "dir"
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = "link"
		if e.Link, err = os.Readlink(path); err != nil {
			return nil, fmt.Errorf("scanning the project: %w", err)
		}
	case fi.Mode().IsRegular():
		e.Type, e.Size = "file", fi.Size()
	default:
		e.Type, e.why = "special", sendOther
	}
	return e, nil
}

// noteLinkTarget notes the project file a masked or denied symlink leads
// to: the local jail shows that file masked or not at all through the
// link, so the remote must not get it in the clear under its own name.
func noteLinkTarget(root, path string, rules *secretRules, masked, denied map[string]bool) {
	secret, deny := rules.isSecret(path), rules.isDenied(path)
	if !secret && !deny {
		return
	}
	target, err := filepath.EvalSymlinks(path)
	if err != nil || target == root || !jail.Under(target, root) {
		return
	}
	rel := filepath.ToSlash(target[len(root)+1:])
	if deny {
		denied[rel] = true
	} else {
		masked[rel] = true
	}
}

// classifyEntries says for each file whether it is sent plain, masked or not at
// all: by the secret and denied patterns, by a masked or denied symlink
// leading to it, and by hard links to any of those.
func classifyEntries(root string, entries map[string]*localEntry, rules *secretRules, maskedLinks, deniedLinks map[string]bool) {
	byInode := map[[2]uint64][]*localEntry{}
	for rel, e := range entries {
		if e.Type != "file" {
			continue
		}
		switch {
		case marked(deniedLinks, rel) || rules.isDenied(e.abs) || underDenied(entries, rel):
			e.why = sendDenied
		case marked(maskedLinks, rel) || rules.isSecret(e.abs):
			e.why = sendMasked
		}
		if e.nlink > 1 {
			byInode[e.inode] = append(byInode[e.inode], e)
		}
	}
	var outside *inodeSet
	for key, names := range byInode {
		why := linkedClass(names)
		if why == sendPlain && uint64(len(names)) < names[0].nlink {
			if outside == nil {
				outside = sensitiveInodes(rules)
			}
			if !outside.complete || outside.keys[key] {
				why = sendDenied
			}
		}
		for _, e := range names {
			if why == sendDenied {
				e.why = sendDenied
			} else if why == sendMasked && e.why != sendMasked {
				e.why = sendLinked
			}
		}
	}
}

// marked reports whether rel or a directory above it is in set.
func marked(set map[string]bool, rel string) bool {
	for p := rel; p != "."; p = filepath.Dir(p) {
		if set[filepath.ToSlash(p)] {
			return true
		}
	}
	return false
}

// underDenied reports whether a directory above rel was found denied.
func underDenied(entries map[string]*localEntry, rel string) bool {
	for d := filepath.Dir(rel); d != "."; d = filepath.Dir(d) {
		if e := entries[filepath.ToSlash(d)]; e != nil && e.why == sendDenied {
			return true
		}
	}
	return false
}

// linkedClass is what the names of one inode share: denied when one is,
// else masked when one is.
func linkedClass(names []*localEntry) string {
	why := sendPlain
	for _, e := range names {
		switch e.why {
		case sendDenied:
			return sendDenied
		case sendMasked:
			why = sendMasked
		}
	}
	return why
}

// fill adds digests, and masked copies for masked files (mask nil or
// refusing: the file is not sent), in path order: placeholders handed
// out while masking come in the same order every time.
func fill(entries map[string]*localEntry, mask MaskFunc, old *Manifest) {
	for _, rel := range sortedKeys(entries) {
		e := entries[rel]
		if e.Type != "file" || !e.sent() {
			continue
		}
		sum, err := fileDigest(e, old)
		if err != nil {
			e.why = sendUnread
			continue
		}
		if e.why != sendMasked {
			e.SHA256 = sum
			continue
		}
		e.Masked, e.Source = true, sum
		var ok bool
		if mask != nil {
			e.content, ok = mask(e.abs)
		}
		if !ok {
			e.why, e.Masked, e.content = sendSecret, false, nil
			continue
		}
		e.SHA256, e.Size = digest(e.content), int64(len(e.content))
	}
}

// fileDigest is the digest of a local file, taken from old when the file
// is the one old described (same inode, size, times).
func fileDigest(e *localEntry, old *Manifest) (string, error) {
	if old != nil {
		if o := old.Entries[e.Path]; o != nil && o.Type == "file" && o.Ino == e.Ino && o.MTime == e.MTime && o.CTime == e.CTime && e.CTime != 0 {
			if o.Masked && o.Source != "" {
				return o.Source, nil
			}
			if !o.Masked && o.Size == e.Size && o.SHA256 != "" {
				return o.SHA256, nil
			}
		}
	}
	f, err := os.Open(e.abs)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", e.abs, err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("reading %s: %w", e.abs, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// inodeSet holds the inodes of denied and masked files outside the
// project; complete is false when not every denied tree could be walked.
type inodeSet struct {
	keys     map[[2]uint64]bool
	complete bool
}

// maxOutside bounds the entries walked to find denied files' inodes.
const maxOutside = 50000

// sensitiveInodes walks the denied paths outside the project for the
// inodes of their files with more than one name.
func sensitiveInodes(rules *secretRules) *inodeSet {
	set := &inodeSet{keys: map[[2]uint64]bool{}, complete: true}
	seen := 0
	bulk := jailBulk(rules.home)
	for _, pat := range append(append([]string{}, rules.denied...), rules.secret...) {
		base := strings.TrimSuffix(pat, "/")
		if jail.HasMeta(base) {
			base = jail.GlobBase(base)
		}
		if jail.Under(base, rules.root) {
			continue // the project's own walk sees these
		}
		if base == "/" || base == rules.home || bulk[base] {
			if jail.HasMeta(pat) {
				set.complete = false // too wide to walk at every sync
			}
			continue
		}
		_ = filepath.WalkDir(base, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return nil
			}
			if seen++; seen > maxOutside {
				set.complete = false
				return fs.SkipAll
			}
			if !d.Type().IsRegular() || !matchesOrUnder([]string{pat}, path) {
				return nil
			}
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
					set.keys[[2]uint64{uint64(st.Dev), uint64(st.Ino)}] = true
				}
			}
			return nil
		})
	}
	return set
}

// jailBulk are the home's bulk credential stores: masked whole, never
// searched for other names (a hard link into one is made by hand).
func jailBulk(home string) map[string]bool {
	out := map[string]bool{}
	for _, rel := range credstores.Bulk {
		out[filepath.Join(home, rel)] = true
	}
	return out
}
