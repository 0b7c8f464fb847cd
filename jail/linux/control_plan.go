package linux

import "path/filepath"

// hideControl masks the runtime directory (every session's proxy
// sockets, and ctl/, the control sockets) with an empty tmpfs wherever a
// bind shows it, such as --allow-read of the temporary directory or of
// $XDG_RUNTIME_DIR: a jailed process must not find, let alone dial, the
// sockets that widen the jail or answer what it asks. The session's own
// sockets reach the jail through their own binds, which the mask does not
// cover. A runtime directory missing at planning is made before the jail
// starts, so that the mask has its mount point.
func (b *builder) hideControl() {
	if b.f.SessionDir == "" {
		return
	}
	dir := filepath.Dir(b.f.SessionDir)
	dest := dir
	if d, _, ok := b.inJail(dir); ok {
		dest = d
	} else if seen, _ := b.visible(dir); !seen {
		return
	} else if !b.f.info(dir).Exists {
		b.p.CreateDirs = append(b.p.CreateDirs, dir)
	}
	if b.isMasked(dest) {
		return
	}
	b.maskSet[dest] = true
	b.masks = append(b.masks, Op{Kind: "mask-dir", Dest: dest, Why: "live control and session sockets"})
	b.pinAboveMask(dest)
}
