package remote

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/jailsh/jail/jail"
)

// BinDir is where the jail binaries go on the remote, under its home.
const BinDir = ".local/share/jail/bin"

// Binaries are jail's own binaries to run on the remote, by remote name
// ("jail", "jail-init"): those beside the running jail, or, for another
// architecture, jail-linux-ARCH and jail-init-linux-ARCH beside it.
type Binaries map[string]Binary

// Binary is one local binary and its checksum.
type Binary struct {
	Path string
	Sum  string // sha256, hex
	Size int64
}

// RemoteFacts are what the probe found on the remote.
type RemoteFacts struct {
	OS, Arch   string // uname -s, uname -m
	Home       string
	Sums       map[string]string // the installed binaries' sha256
	Bwrap      string            // bwrap's path, "" when it is not installed
	UserNS     bool              // bwrap --unshare-user ran
	UserNSErr  string            // what bwrap said when it did not
	Sysctls    map[string]string // the sysctls that restrict user namespaces
	SessionDir string            // the fresh per-session directory, holding spec.json
}

// probeScript prints what the remote is, which binaries it has (their
// checksums cached beside them by size, inode, modification and change
// time: any write to a binary changes its change time), whether
// bubblewrap runs with a user namespace, and, when it can run a jail,
// makes a fresh private session directory (net/ in it for the forwarded
// sockets, short for their names) and writes stdin there as the spec. $1 lists the uname -m values jail has binaries for; nothing is
// made when the remote is not Linux on one of them, or cannot jail.
const probeScript = `umask 077
d="$HOME/` + BinDir + `"
echo "home $HOME"
echo "os $(uname -s) $(uname -m)"
for f in jail jail-init; do
	[ -f "$d/$f" ] || continue
	k=$(stat -c '%s %i %y %z' "$d/$f" 2>/dev/null) c=$(cat "$d/.sum-$f" 2>/dev/null)
	case $c in
	"$k "*) echo "sum $f ${c##* }" ;;
	*) s=$(sha256sum <"$d/$f" | cut -d' ' -f1) && echo "sum $f $s" && [ -n "$k" ] && echo "$k $s" >"$d/.sum-$f" ;;
	esac
done
for s in kernel/unprivileged_userns_clone user/max_user_namespaces kernel/apparmor_restrict_unprivileged_userns; do
	[ -r /proc/sys/$s ] && echo "sysctl $s $(cat /proc/sys/$s)"
done
[ "$(uname -s)" = Linux ] || exit 0
case " $1 " in *" $(uname -m) "*) ;; *) exit 0;; esac
b=$(command -v bwrap) || exit 0
echo "bwrap $b"
if e=$("$b" --unshare-user --ro-bind / / true 2>&1); then echo userns ok; else echo "userns no $e" | tr '\n' ' '; echo; exit 0; fi
[ "$2" = session ] || exit 0
s=$(mktemp -d /tmp/jail-r.XXXXXXXXXX) && mkdir "$s/net" && cat >"$s/spec.json" && echo "session $s"
`

// maxProbe bounds what the probe and the upload read back: a few lines
// each.
const maxProbe = 1 << 20

// Probe runs the probe in one round trip, sending spec for the session
// directory it makes (none when spec is nil).
func Probe(ctx context.Context, c *Conn, spec []byte) (*RemoteFacts, error) {
	var arches []string
	for _, a := range Arches() {
		arches = append(arches, Uname(a))
	}
	var out bytes.Buffer
	var errb bytes.Buffer
	if err := c.RunLimit(ctx, maxProbe, Script(probeScript, strings.Join(arches, " "), map[bool]string{true: "session", false: "none"}[spec != nil]), bytes.NewReader(spec), &out, &errb); err != nil {
		var se *SSHError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, fmt.Errorf("probing %s: %w: %s", c.SSH.Target.Shown(), err, jail.Escaped(lastLine(errb.String())))
	}
	return parseProbe(out.String()), nil
}

// parseProbe reads the probe's lines.
func parseProbe(out string) *RemoteFacts {
	f := &RemoteFacts{Sums: map[string]string{}, Sysctls: map[string]string{}}
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		key, rest, _ := strings.Cut(sc.Text(), " ")
		switch key {
		case "home":
			f.Home = rest
		case "os":
			f.OS, f.Arch, _ = strings.Cut(rest, " ")
		case "sum":
			if n, s, ok := strings.Cut(rest, " "); ok {
				f.Sums[n] = s
			}
		case "sysctl":
			if n, v, ok := strings.Cut(rest, " "); ok {
				f.Sysctls[strings.ReplaceAll(n, "/", ".")] = v
			}
		case "bwrap":
			f.Bwrap = rest
		case "userns":
			f.UserNS = rest == "ok"
			f.UserNSErr = strings.TrimSpace(strings.TrimPrefix(rest, "no"))
		case "session":
			f.SessionDir = rest
		}
	}
	return f
}

// CanRun says why jail cannot run on the remote at all (another OS, an
// architecture jail has no binary for), naming the fix, or nil.
func (f *RemoteFacts) CanRun(t Target) error {
	switch {
	case f.OS != "Linux":
		return fmt.Errorf("%s runs %s, and jail --remote needs a Linux host (bubblewrap, Landlock, seccomp); pick a Linux host", t.Shown(), jail.Escaped(orUnknown(f.OS)))
	case !slices.Contains(Arches(), GoArch(f.Arch)):
		return fmt.Errorf("%s is linux/%s and this jail is linux/%s; build jail for it beside this one: GOOS=linux GOARCH=%s CGO_ENABLED=0 go build -o %s ./cmd/jail (and -o %s ./cmd/jail-init)",
			t.Shown(), jail.Escaped(f.Arch), runtime.GOARCH, GoArch(f.Arch), "DIR/jail-linux-"+GoArch(f.Arch), "DIR/jail-init-linux-"+GoArch(f.Arch))
	}
	return nil
}

// CanJail says why the remote cannot run a jail, naming the fix, or nil.
// A remote that cannot is never used unjailed.
func (f *RemoteFacts) CanJail(t Target) error {
	if err := f.CanRun(t); err != nil {
		return err
	}
	switch {
	case f.Bwrap == "":
		return fmt.Errorf("%s has no bubblewrap (bwrap is not on its PATH), and jail never runs a command there unjailed; install it there: sudo apt-get install bubblewrap", t.Shown())
	case !f.UserNS:
		return fmt.Errorf("%s cannot make user namespaces (bwrap: %s), and jail never runs a command there unjailed; %s", t.Shown(), jail.Escaped(orUnknown(f.UserNSErr)), f.userNSFix())
	case f.SessionDir == "":
		return fmt.Errorf("%s: the probe made no session directory under /tmp; check that /tmp is writable there", t.Shown())
	}
	return ValidRemoteDir(f.SessionDir)
}

// userNSFix names the sysctl that keeps user namespaces off.
func (f *RemoteFacts) userNSFix() string {
	switch {
	case f.Sysctls["kernel.apparmor_restrict_unprivileged_userns"] == "1":
		return "AppArmor restricts them: install the distribution's bubblewrap (its AppArmor profile allows it), or sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0"
	case f.Sysctls["kernel.unprivileged_userns_clone"] == "0":
		return "enable them there: sudo sysctl -w kernel.unprivileged_userns_clone=1"
	case f.Sysctls["user.max_user_namespaces"] == "0":
		return "enable them there: sudo sysctl -w user.max_user_namespaces=15000"
	}
	return "enable unprivileged user namespaces there (a container host may forbid them: use a VM or a bare machine)"
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// Uname is uname -m for a Go architecture.
func Uname(goarch string) string {
	switch goarch {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	case "386":
		return "i686"
	case "arm":
		return "armv7l"
	}
	return goarch
}

// GoArch is the Go architecture for uname -m.
func GoArch(uname string) string {
	switch uname {
	case "x86_64":
		return "amd64"
	case "aarch64", "arm64":
		return "arm64"
	case "i386", "i686":
		return "386"
	case "armv7l", "armv6l":
		return "arm"
	}
	return uname
}

// uploadScript installs each binary sent on stdin: for each "NAME SIZE
// SUM" in the arguments, SIZE bytes go to a temporary file beside the
// final one, are checked against SUM and renamed over it (a reader sees
// the old binary or the new one, never part of one); SIZE "-" removes
// NAME. NAME is one of jail's own.
const uploadScript = `set -eu
umask 022
d="$HOME/` + BinDir + `"
mkdir -p "$d"
while [ $# -ge 3 ]; do
	n=$1 size=$2 sum=$3; shift 3
	case $n in jail|jail-init) ;; *) echo "jail: not a jail binary: $n" >&2; exit 3;; esac
	if [ "$size" = - ]; then rm -f "$d/$n" "$d/.sum-$n"; continue; fi
	t=$(mktemp "$d/.$n.XXXXXXXX")
	head -c "$size" >"$t"
	if [ "$(sha256sum <"$t" | cut -d' ' -f1)" != "$sum" ]; then rm -f "$t"; echo "jail: $n arrived cut short or changed" >&2; exit 3; fi
	chmod 755 "$t"
	mv -f "$t" "$d/$n"
	echo "$(stat -c '%s %i %y %z' "$d/$n") $sum" >"$d/.sum-$n"
done
`

// Upload installs the binaries whose checksum the remote lacks (and
// removes a jail-init the local side has none of, which the remote jail
// would otherwise start as its init), in one round trip. It returns the
// names sent.
func Upload(ctx context.Context, c *Conn, bins Binaries, f *RemoteFacts) ([]string, error) {
	var args, sent []string
	var files []io.Reader
	for _, name := range []string{"jail", "jail-init"} {
		b, ok := bins[name]
		switch {
		case !ok && f.Sums[name] != "":
			args = append(args, name, "-", "-")
		case ok && f.Sums[name] != b.Sum:
			fh, err := os.Open(b.Path)
			if err != nil {
				return nil, fmt.Errorf("reading %s: %w", b.Path, err)
			}
			defer fh.Close()
			args = append(args, name, strconv.FormatInt(b.Size, 10), b.Sum)
			files = append(files, io.LimitReader(fh, b.Size))
			sent = append(sent, name)
		}
	}
	if len(args) == 0 {
		return nil, nil
	}
	var errb bytes.Buffer
	if err := c.RunLimit(ctx, maxProbe, Script(uploadScript, args...), io.MultiReader(files...), io.Discard, &errb); err != nil {
		return nil, fmt.Errorf("installing jail on %s: %w: %s", c.SSH.Target.Shown(), err, jail.Escaped(lastLine(errb.String())))
	}
	return sent, nil
}

// Arches are the architectures jail has binaries for: its own, and each
// jail-linux-ARCH beside it.
func Arches() []string {
	var out []string
	if runtime.GOOS == "linux" {
		out = append(out, runtime.GOARCH)
	}
	exe, err := os.Executable()
	if err != nil {
		return out
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	others, _ := filepath.Glob(filepath.Join(filepath.Dir(exe), "jail-linux-*"))
	for _, p := range others {
		if a := strings.TrimPrefix(filepath.Base(p), "jail-linux-"); !slices.Contains(out, a) && plainWord(a) {
			out = append(out, a)
		}
	}
	return out
}

// LocalBinaries finds the binaries for a remote of architecture goarch:
// for this one, the running jail and the jail-init beside it; for
// another, jail-linux-ARCH (and jail-init-linux-ARCH) beside it. Sums are
// cached in cacheDir by path, size, time and inode.
func LocalBinaries(goarch, cacheDir string) (Binaries, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the jail binary: %w", err)
	}
	if r, err := filepath.EvalSymlinks(exe); err == nil {
		exe = r
	}
	dir := filepath.Dir(exe)
	names := map[string]string{"jail": exe, "jail-init": filepath.Join(dir, "jail-init")}
	if goarch != runtime.GOARCH || runtime.GOOS != "linux" {
		names = map[string]string{"jail": filepath.Join(dir, "jail-linux-"+goarch), "jail-init": filepath.Join(dir, "jail-init-linux-"+goarch)}
	}
	bins := Binaries{}
	for name, p := range names {
		b, err := readBinary(p, cacheDir)
		if errors.Is(err, os.ErrNotExist) && name == "jail-init" {
			continue // the remote jail re-executes itself as init
		}
		if err != nil {
			return nil, err
		}
		bins[name] = b
	}
	return bins, nil
}

// readBinary reads a binary's size and checksum, from the cache when the
// file is unchanged.
func readBinary(path, cacheDir string) (Binary, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return Binary{}, err
	}
	key := sumKey(fi)
	cache := filepath.Join(cacheDir, "sum-"+hex.EncodeToString(sha256Sum([]byte(path)))[:16])
	if b, err := os.ReadFile(cache); err == nil {
		if k, s, ok := strings.Cut(string(b), " "); ok && k == key && len(s) == 64 {
			return Binary{Path: path, Sum: s, Size: fi.Size()}, nil
		}
	}
	fh, err := os.Open(path)
	if err != nil {
		return Binary{}, err
	}
	defer fh.Close()
	h := sha256.New()
	if _, err := io.Copy(h, fh); err != nil {
		return Binary{}, fmt.Errorf("reading %s: %w", path, err)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if os.MkdirAll(cacheDir, 0o700) == nil {
		os.WriteFile(cache, []byte(key+" "+sum), 0o600) // a cache: a failure costs a re-read
	}
	return Binary{Path: path, Sum: sum, Size: fi.Size()}, nil
}

func sha256Sum(b []byte) []byte {
	s := sha256.Sum256(b)
	return s[:]
}
