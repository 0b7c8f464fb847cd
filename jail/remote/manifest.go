package remote

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// ManifestEntry is one project entry as the last sync left it on the
// remote: what was sent (a masked file's masked copy), the local file it
// came from, and how the remote reported it afterwards.
type ManifestEntry struct {
	Path   string `json:"path"` // slash-separated, relative to the project
	Type   string `json:"type"` // "file", "dir" or "link"
	Mode   uint32 `json:"mode"` // permission bits
	Size   int64  `json:"size"`
	MTime  int64  `json:"mtime"`            // local modification time, Unix nanoseconds
	SHA256 string `json:"sha256,omitempty"` // of the content the remote holds
	Link   string `json:"link,omitempty"`   // a symlink's target, as written
	// Masked: the remote holds the masked copy; Source is then the
	// local file's own digest, which tells a local change.
	Masked bool   `json:"masked,omitempty"`
	Source string `json:"source,omitempty"`
	// Ino and CTime let a later scan reuse the digest of a file that
	// has not changed since.
	Ino   uint64 `json:"ino,omitempty"`
	CTime int64  `json:"ctime,omitempty"`
	// Remote is the remote's own report of the entry after the sync:
	// size, modification time as find printed it, mode.
	Remote *RemoteStat `json:"remote,omitempty"`
}

// RemoteStat is an entry as the remote lists it.
type RemoteStat struct {
	Type  string `json:"type"`
	Mode  uint32 `json:"mode"`
	Size  int64  `json:"size"`
	MTime string `json:"mtime"`
	Link  string `json:"link,omitempty"`
}

// Manifest is what the remote workspace of one project holds, by path.
// Pending is set while the remote holds changes not fetched yet: a sync
// that would overwrite them is refused.
type Manifest struct {
	Host    string                    `json:"host"`
	Root    string                    `json:"root"`
	Dir     string                    `json:"dir"` // the remote directory, absolute
	Pending bool                      `json:"pending,omitempty"`
	Entries map[string]*ManifestEntry `json:"entries"`
}

// SyncStateDir is where jail keeps what it knows of one project's remote
// workspace: its manifest and the remote changes it would not apply.
func SyncStateDir(stateDir, host, root string) string {
	return filepath.Join(stateDir, "remote", stateKey(host), stateKey(root))
}

var unsafeKey = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// stateKey is a short file name for s: its readable part and a digest
// that keeps two names apart.
func stateKey(s string) string {
	sum := sha256.Sum256([]byte(s))
	base := unsafeKey.ReplaceAllString(filepath.Base(s), "_")
	if len(base) > 32 {
		base = base[:32]
	}
	return base + "-" + hex.EncodeToString(sum[:6])
}

// LoadManifest reads the manifest in dir; a missing one is (nil, nil).
func LoadManifest(dir string) (*Manifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "manifest.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the sync manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("reading the sync manifest %s: %w", dir, err)
	}
	if m.Entries == nil {
		m.Entries = map[string]*ManifestEntry{}
	}
	return &m, nil
}

// Save writes m to dir atomically, readable by the user only.
func (m *Manifest) Save(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("saving the sync manifest: %w", err)
	}
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		return fmt.Errorf("saving the sync manifest: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".manifest-*")
	if err != nil {
		return fmt.Errorf("saving the sync manifest: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return fmt.Errorf("saving the sync manifest: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("saving the sync manifest: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, "manifest.json")); err != nil {
		return fmt.Errorf("saving the sync manifest: %w", err)
	}
	return nil
}

// Paths are the manifest's paths, sorted.
func (m *Manifest) Paths() []string {
	out := make([]string, 0, len(m.Entries))
	for p := range m.Entries {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// digest is the hex SHA-256 of b.
func digest(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
