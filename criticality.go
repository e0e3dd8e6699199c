package levee

import (
	"errors"
	"strconv"
	"strings"
)

// Criticality says how important a request is. Under overload levee sheds
// the lowest criticality first: Sheddable, then SheddablePlus, then Critical,
// and CriticalPlus last of all.
//
// The zero value is Critical, the default for a request that says nothing.
type Criticality uint8

// The four criticality levels. Their numeric values are not their order of
// importance (the zero value must be the default, Critical): use Rank or
// Number to compare them.
const (
	// Critical is the default: user-visible work whose failure is noticed.
	Critical Criticality = 0
	// CriticalPlus is the most important work, shed last of all.
	CriticalPlus Criticality = 1
	// SheddablePlus is deferrable work: batch jobs that will retry later.
	SheddablePlus Criticality = 2
	// Sheddable is work whose loss is tolerated: prefetch, speculative calls.
	Sheddable Criticality = 3
)

// NumCriticalities is the number of criticality levels.
const NumCriticalities = 4

// ErrBadCriticality is returned (wrapped) by ParseCriticality for input that
// names no criticality.
var ErrBadCriticality = errors.New("levee: unknown criticality")

var critNames = [NumCriticalities]string{
	Critical:      "CRITICAL",
	CriticalPlus:  "CRITICAL_PLUS",
	SheddablePlus: "SHEDDABLE_PLUS",
	Sheddable:     "SHEDDABLE",
}

// rank: 0 for the level shed first, 3 for the level shed last.
var critRank = [NumCriticalities]uint8{
	Critical:      2,
	CriticalPlus:  3,
	SheddablePlus: 1,
	Sheddable:     0,
}

// byRank: the criticality of each rank.
var byRank = [NumCriticalities]Criticality{Sheddable, SheddablePlus, Critical, CriticalPlus}

// Criticalities returns the four levels in the order levee sheds them:
// index r holds the level whose Rank is r, Sheddable (shed first) at 0 and
// CriticalPlus (shed last) at 3. The result is a copy; it does not
// allocate.
func Criticalities() [NumCriticalities]Criticality { return byRank }

// Valid reports whether c is one of the four levels.
func (c Criticality) Valid() bool { return c < NumCriticalities }

// Rank returns c's place in the order of sacrifice: 0 for Sheddable (shed
// first) up to 3 for CriticalPlus (shed last). An invalid value ranks as
// Critical.
func (c Criticality) Rank() int {
	if !c.Valid() {
		return int(critRank[Critical])
	}
	return int(critRank[c])
}

// Number returns the founding text's number for c: 4 for CriticalPlus,
// 3 Critical, 2 SheddablePlus, 1 Sheddable.
func (c Criticality) Number() int { return c.Rank() + 1 }

// FromRank returns the criticality whose Rank is r, clamping r to 0..3.
func FromRank(r int) Criticality {
	if r < 0 {
		r = 0
	}
	if r >= NumCriticalities {
		r = NumCriticalities - 1
	}
	return byRank[r]
}

// String returns the wire name: "CRITICAL_PLUS", "CRITICAL",
// "SHEDDABLE_PLUS" or "SHEDDABLE". An invalid value prints as
// "Criticality(n)".
func (c Criticality) String() string {
	if !c.Valid() {
		return "Criticality(" + strconv.Itoa(int(c)) + ")"
	}
	return critNames[c]
}

// ParseCriticality parses a wire name ("CRITICAL_PLUS", "CRITICAL",
// "SHEDDABLE_PLUS", "SHEDDABLE"; ASCII case and surrounding spaces ignored)
// or one of the founding text's numbers "4".."1". Anything else returns
// Critical and an error wrapping ErrBadCriticality; callers that must not
// fail use the returned default.
func ParseCriticality(s string) (Criticality, error) {
	t := strings.TrimSpace(s)
	switch len(t) {
	case 1:
		if t[0] >= '1' && t[0] <= '4' {
			return FromRank(int(t[0] - '1')), nil
		}
	case 8, 9, 13, 14:
		for c, name := range critNames {
			if strings.EqualFold(t, name) {
				return Criticality(c), nil
			}
		}
	}
	return Critical, &parseError{what: "criticality", in: s, err: ErrBadCriticality}
}

// MarshalText implements encoding.TextMarshaler with the wire name.
func (c Criticality) MarshalText() ([]byte, error) {
	if !c.Valid() {
		return nil, &parseError{what: "criticality", in: c.String(), err: ErrBadCriticality}
	}
	return []byte(critNames[c]), nil
}

// UnmarshalText implements encoding.TextUnmarshaler with ParseCriticality.
func (c *Criticality) UnmarshalText(b []byte) error {
	v, err := ParseCriticality(string(b))
	if err != nil {
		return err
	}
	*c = v
	return nil
}

type parseError struct {
	what, in string
	err      error
}

func (e *parseError) Error() string {
	in := e.in
	if len(in) > 40 {
		in = in[:40] + "…"
	}
	return "levee: bad " + e.what + " " + quote(in)
}

func (e *parseError) Unwrap() error { return e.err }

func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '"' || r == '\\' {
			b.WriteString("\\x")
			b.WriteByte("0123456789abcdef"[r>>4&0xf])
			b.WriteByte("0123456789abcdef"[r&0xf])
			continue
		}
		b.WriteRune(r)
	}
	b.WriteByte('"')
	return b.String()
}
