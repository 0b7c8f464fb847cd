package proxy

import "bytes"

// matcher finds any of many patterns in one pass (Wu-Manber): it slides a
// window as long as the shortest pattern and jumps by how far the
// window's last two bytes are from ending any pattern's first window, so
// most of a text is never looked at byte by byte. Every pattern is at
// least two bytes long. find returns the leftmost match, and the longest
// of those that start there.
type matcher struct {
	pats   [][]byte
	win    int                // window: the shortest pattern's length, at most maxWindow
	shift  []uint8            // by the two-byte block ending a window
	bucket map[uint16][]int32 // patterns whose first window ends with the block
	maxLen int
	first  [256]bool // the bytes a pattern starts with
}

const maxWindow = 64

func newMatcher(pats [][]byte) *matcher {
	m := &matcher{pats: pats, win: maxWindow, shift: make([]uint8, 1<<16), bucket: map[uint16][]int32{}}
	for _, p := range pats {
		m.win = min(m.win, len(p))
		m.maxLen = max(m.maxLen, len(p))
	}
	for i := range m.shift {
		m.shift[i] = uint8(m.win - 1)
	}
	for k, p := range pats {
		m.first[p[0]] = true
		for j := 1; j < m.win; j++ {
			blk := block(p[j-1], p[j])
			m.shift[blk] = min(m.shift[blk], uint8(m.win-1-j))
		}
		last := block(p[m.win-2], p[m.win-1])
		m.bucket[last] = append(m.bucket[last], int32(k))
	}
	return m
}

func block(a, b byte) uint16 { return uint16(a)<<8 | uint16(b) }

// find returns the position of the first match in b and which pattern
// matched, or -1, -1.
func (m *matcher) find(b []byte) (int, int) { return findIn(m, b) }

// findString is find on a string, without copying it.
func (m *matcher) findString(s string) (int, int) { return findIn(m, s) }

func findIn[T string | []byte](m *matcher, b T) (int, int) {
	if m == nil {
		return -1, -1
	}
	for i := m.win - 1; i < len(b); {
		blk := block(b[i-1], b[i])
		if sh := m.shift[blk]; sh > 0 {
			i += int(sh)
			continue
		}
		start, best := i-m.win+1, -1
		for _, k := range m.bucket[blk] {
			p := m.pats[k]
			if len(b)-start >= len(p) && string(b[start:start+len(p)]) == string(p) && (best < 0 || len(p) > len(m.pats[best])) {
				best = int(k)
			}
		}
		if best >= 0 {
			return start, best
		}
		i++
	}
	return -1, -1
}

// partial returns the length of the longest suffix of b that a pattern
// starts with (without being that whole pattern).
func (m *matcher) partial(b []byte) int {
	for n := min(len(b), m.maxLen-1); n > 0; n-- {
		s := b[len(b)-n:]
		if !m.first[s[0]] {
			continue
		}
		for _, p := range m.pats {
			if len(p) > n && p[0] == s[0] && bytes.HasPrefix(p, s) {
				return n
			}
		}
	}
	return 0
}

// longer reports whether b (the bytes from a match to the end of what
// has arrived) is a proper prefix of a pattern longer than the match,
// which more bytes could complete.
func (m *matcher) longer(b []byte, matched int) bool {
	for _, p := range m.pats {
		if len(p) > matched && len(p) > len(b) && bytes.HasPrefix(p, b) {
			return true
		}
	}
	return false
}
