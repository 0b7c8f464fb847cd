// Package wordcount counts words in text.
package wordcount

import (
	"bufio"
	"io"
	"sort"
	"strings"
	"unicode"
)

// Count is one word and how often it occurs.
type Count struct {
	Word string
	N    int
}

// Counts reads r and returns each word (lower-cased, letters and digits
// only) with its number of occurrences, most frequent first, ties in
// alphabetical order.
func Counts(r io.Reader) ([]Count, error) {
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Split(bufio.ScanWords)
	for sc.Scan() {
		w := strings.ToLower(strings.TrimFunc(sc.Text(), func(r rune) bool {
			return !unicode.IsLetter(r) && !unicode.IsDigit(r)
		}))
		if w != "" {
			seen[w]++
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := make([]Count, 0, len(seen))
	for w, n := range seen {
		out = append(out, Count{w, n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].N != out[j].N {
			return out[i].N > out[j].N
		}
		return out[i].Word < out[j].Word
	})
	return out, nil
}
