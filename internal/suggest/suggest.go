// Package suggest finds the name a user most likely meant when they
// mistyped one: a scenario, a configuration field, a command, an option.
// Error messages of levee's tools end with Hint's "(did you mean …?)".
//
// Layering: a leaf (internal/...), standard library only: the library's
// configuration (package config) and the tools use it alike.
package suggest

import (
	"fmt"
	"strings"
)

// Closest returns the candidate closest to word, or "" if none is close
// enough to be a likely typo: at most one edit (insertion, deletion,
// substitution or transposition of neighbours) per three letters of the
// longer of the two, at least one; or word is a prefix of the candidate
// (three letters or more). Case is ignored. Ties go to the earlier
// candidate, so the answer does not depend on map order when candidates
// come sorted.
func Closest(word string, candidates []string) string {
	w := strings.ToLower(word)
	best, bestD := "", -1
	for _, c := range candidates {
		lc := strings.ToLower(c)
		if lc == w {
			return c
		}
		d := distance(w, lc)
		limit := max(1, max(len([]rune(w)), len([]rune(lc)))/3)
		if d > limit && !(len(w) >= 3 && strings.HasPrefix(lc, w)) {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// Hint returns ` (did you mean "x"?)` for the Closest candidate, or "".
func Hint(word string, candidates []string) string {
	if c := Closest(word, candidates); c != "" {
		return fmt.Sprintf(" (did you mean %q?)", c)
	}
	return ""
}

// distance is the optimal string alignment distance between a and b
// (Levenshtein with transpositions of neighbours), over runes.
func distance(a, b string) int {
	x, y := []rune(a), []rune(b)
	// Three rows: two back (for transpositions), previous, current.
	pp, prev, cur := make([]int, len(y)+1), make([]int, len(y)+1), make([]int, len(y)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(x); i++ {
		cur[0] = i
		for j := 1; j <= len(y); j++ {
			cost := 1
			if x[i-1] == y[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && x[i-1] == y[j-2] && x[i-2] == y[j-1] {
				cur[j] = min(cur[j], pp[j-2]+1)
			}
		}
		pp, prev, cur = prev, cur, pp
	}
	return prev[len(y)]
}
