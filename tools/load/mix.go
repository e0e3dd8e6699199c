package load

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/levee-dev/levee"
)

// Share is one class of a Mix and its weight.
type Share struct {
	Name   string  `json:"name"`
	Weight float64 `json:"weight"`
}

// Mix says which criticality and which tenant each arrival carries. The
// zero Mix sends every request as CRITICAL with no tenant.
//
// Assignment is deterministic and evenly spread: the k-th arrival of a
// run takes the class whose cumulative weight covers frac(k·α) for an
// irrational α (a Weyl sequence, one α for criticality and another for
// tenants), so any stretch of arrivals holds each class in proportion to
// its weight, the two choices are independent, and no random source is
// involved.
type Mix struct {
	// Criticalities are weights by criticality name (CRITICAL_PLUS,
	// CRITICAL, SHEDDABLE_PLUS, SHEDDABLE, or 4..1).
	Criticalities []Share `json:"criticalities,omitempty"`
	// Tenants are weights by tenant id; at most MaxTenants.
	Tenants []Share `json:"tenants,omitempty"`
}

// MaxTenants bounds the tenants of a Mix (each is counted apart, in
// every phase).
const MaxTenants = 10000

// The irrational steps of the two Weyl sequences: the golden ratio's
// fractional part and √2 − 1.
var (
	critStep   = (math.Sqrt(5) - 1) / 2
	tenantStep = math.Sqrt2 - 1
)

// compiled is a Mix ready for assignment: cumulative weights.
type compiled struct {
	crits     []levee.Criticality
	critCum   []float64
	tenants   []string
	tenantCum []float64
}

func (m Mix) compile() (compiled, error) {
	var c compiled
	if len(m.Criticalities) == 0 {
		c.crits, c.critCum = []levee.Criticality{levee.Critical}, []float64{1}
	} else {
		var names []string
		for _, s := range m.Criticalities {
			names = append(names, s.Name)
		}
		cum, err := cumulative(m.Criticalities)
		if err != nil {
			return c, fmt.Errorf("load: criticality mix: %w", err)
		}
		for _, n := range names {
			cr, err := levee.ParseCriticality(n)
			if err != nil {
				return c, fmt.Errorf("load: criticality mix: unknown criticality %q (want CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE or 4..1)", n)
			}
			c.crits = append(c.crits, cr)
		}
		c.critCum = cum
	}
	if len(m.Tenants) > MaxTenants {
		return c, fmt.Errorf("load: %d tenants, at most %d", len(m.Tenants), MaxTenants)
	}
	if len(m.Tenants) > 0 {
		cum, err := cumulative(m.Tenants)
		if err != nil {
			return c, fmt.Errorf("load: tenant mix: %w", err)
		}
		seen := map[string]bool{}
		for _, s := range m.Tenants {
			if s.Name == "" || seen[s.Name] {
				return c, fmt.Errorf("load: tenant mix: empty or repeated tenant %q", s.Name)
			}
			seen[s.Name] = true
			c.tenants = append(c.tenants, s.Name)
		}
		c.tenantCum = cum
	}
	return c, nil
}

func cumulative(ss []Share) ([]float64, error) {
	var sum float64
	for _, s := range ss {
		if !(s.Weight >= 0) || math.IsInf(s.Weight, 0) {
			return nil, fmt.Errorf("weight %v of %q, want ≥ 0", s.Weight, s.Name)
		}
		sum += s.Weight
	}
	if sum <= 0 {
		return nil, fmt.Errorf("weights sum to 0")
	}
	out := make([]float64, len(ss))
	var acc float64
	for i, s := range ss {
		acc += s.Weight / sum
		out[i] = acc
	}
	out[len(out)-1] = 1
	return out, nil
}

// pick returns the index of the class covering frac(k·step).
func pick(k int64, step float64, cum []float64) int {
	if len(cum) == 1 {
		return 0
	}
	_, u := math.Modf(float64(k) * step)
	return sort.SearchFloat64s(cum, u) // first cum ≥ u
}

// assign returns the criticality index and tenant index (-1: none) of the
// k-th arrival.
func (c *compiled) assign(k int64) (int, int) {
	ci := min(pick(k, critStep, c.critCum), len(c.crits)-1)
	ti := -1
	if len(c.tenants) > 0 {
		ti = min(pick(k, tenantStep, c.tenantCum), len(c.tenants)-1)
	}
	return ci, ti
}

// ParseShares parses "NAME=WEIGHT,NAME=WEIGHT" (the form of the CLI's
// --criticality and --tenants); a bare NAME weighs 1, and "N tenants"
// written as a number alone ("50") makes N equal tenants t1 … tN.
func ParseShares(s string) ([]Share, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, nil
	}
	if n, err := strconv.Atoi(s); err == nil {
		if n < 1 || n > MaxTenants {
			return nil, fmt.Errorf("%d classes, want 1 … %d", n, MaxTenants)
		}
		out := make([]Share, n)
		for i := range out {
			out[i] = Share{Name: "t" + strconv.Itoa(i+1), Weight: 1}
		}
		return out, nil
	}
	var out []Share
	for _, part := range strings.Split(s, ",") {
		name, w, ok := strings.Cut(strings.TrimSpace(part), "=")
		sh := Share{Name: strings.TrimSpace(name), Weight: 1}
		if ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(w), 64)
			if err != nil || !(v >= 0) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("weight %q of %q: want a number ≥ 0", w, sh.Name)
			}
			sh.Weight = v
		}
		if sh.Name == "" {
			return nil, fmt.Errorf("empty name in %q", s)
		}
		out = append(out, sh)
	}
	return out, nil
}
