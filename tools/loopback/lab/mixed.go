package lab

import (
	"math"
	"strconv"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
)

// Trusted is the network the labs' Levee backend trusts: every loopback
// client.
const Trusted = "127.0.0.0/8"

// Variant names.
const (
	OneTenant   = "1 tenant"
	ManyTenants = "2000 tenants"
	NoLevels    = "no criticality"
	FourLevels  = "4 criticalities"
	Neighbours  = "5x beside nine"
)

// ManyTenantCount is the tenants of the Tenants lab's crowd.
const ManyTenantCount = 2000

// Tenant ids. The crowd's are t1 … t2000.
const (
	LabTenant = "lab"
	BigTenant = "big"
)

var inf = math.Inf(1)

// Tenants is issue 14's loopback check of tenant fairness: 3× the
// capacity from 2,000 trusted tenant ids evenly, beside the same load
// from one, 1 ms of CPU per request. Goodput with the crowd must be
// ≥ 0.95 of the single tenant's in the same run, and the server must
// serve ≥ 95% of the load after the overload within 2 s.
func Tenants() *Lab {
	crowd := make([]load.Share, ManyTenantCount)
	for i := range crowd {
		crowd[i] = load.Share{Name: "t" + strconv.Itoa(i+1), Weight: 1}
	}
	const over = "3x"
	good := Goodput(over)
	return &Lab{
		Name:  "tenants",
		Setup: "trusted callers (127.0.0.0/8); tenant from Levee-Tenant: one id, or 2000 ids t1…t2000 in equal shares; every request CRITICAL",
		Work:  time.Millisecond,
		Steps: []Step{
			{"0.7x", 0.7, 4 * time.Second},
			{over, 3, 8 * time.Second},
			{"0.5x", 0.5, 5 * time.Second},
		},
		Overload: over,
		Variants: []Variant{
			{OneTenant, backend.Levee, load.Mix{Tenants: []load.Share{{Name: LabTenant, Weight: 1}}}},
			{ManyTenants, backend.Levee, load.Mix{Tenants: crowd}},
		},
		Trust: []string{Trusted},
		Figures: []Figure{
			{"served at 0.7x", Served("0.7x")},
			{"goodput 3x ÷ capacity", good},
			{"attempts ÷ offered at 3x", attempts(over)},
			{"recovery after 3x (s)", Recovery(over)},
		},
		Checks: []Check{
			{"goodput 3x, 2000 tenants ÷ 1 tenant (paired)", paired(ManyTenants, OneTenant, good), 0.95, inf},
			{"recovery after 3x, 2000 tenants (s)", median(ManyTenants, Recovery(over)), 0, 2},
		},
	}
}

// Ladder is issue 16's loopback check of shedding by criticality: 2× the
// capacity split evenly over the four criticalities, beside the same load
// with every request CRITICAL, one trusted tenant. CRITICAL_PLUS must be
// served ≥ 99%, CRITICAL ≥ 75%, each SHEDDABLE level ≤ 10%, and the
// total goodput be within 5% of the load without levels.
func Ladder() *Lab {
	const over = "2x"
	good := Goodput(over)
	four := load.Mix{
		Criticalities: []load.Share{
			{Name: levee.CriticalPlus.String(), Weight: 1}, {Name: levee.Critical.String(), Weight: 1},
			{Name: levee.SheddablePlus.String(), Weight: 1}, {Name: levee.Sheddable.String(), Weight: 1},
		},
		Tenants: []load.Share{{Name: LabTenant, Weight: 1}},
	}
	none := load.Mix{Tenants: []load.Share{{Name: LabTenant, Weight: 1}}}
	level := func(c levee.Criticality) func(Run) float64 { return ClassServed(over, c.String()) }
	return &Lab{
		Name:  "ladder",
		Setup: "trusted callers (127.0.0.0/8), Levee-Criticality honoured in full; one tenant, the id \"lab\" in Levee-Tenant; the load without levels sends CRITICAL",
		Work:  time.Millisecond,
		Steps: []Step{
			{"0.7x", 0.7, 4 * time.Second},
			{over, 2, 8 * time.Second},
			{"0.5x", 0.5, 5 * time.Second},
		},
		Overload: over,
		Variants: []Variant{{NoLevels, backend.Levee, none}, {FourLevels, backend.Levee, four}},
		Trust:    []string{Trusted},
		Figures: []Figure{
			{"goodput 2x ÷ capacity", good},
			{"served CRITICAL_PLUS", level(levee.CriticalPlus)},
			{"served CRITICAL", level(levee.Critical)},
			{"served SHEDDABLE_PLUS", level(levee.SheddablePlus)},
			{"served SHEDDABLE", level(levee.Sheddable)},
			{"attempts ÷ offered at 2x", attempts(over)},
			{"recovery after 2x (s)", Recovery(over)},
		},
		Checks: []Check{
			{"served CRITICAL_PLUS", median(FourLevels, level(levee.CriticalPlus)), 0.99, inf},
			{"served CRITICAL", median(FourLevels, level(levee.Critical)), 0.75, inf},
			{"served SHEDDABLE_PLUS", median(FourLevels, level(levee.SheddablePlus)), 0, 0.10},
			{"served SHEDDABLE", median(FourLevels, level(levee.Sheddable)), 0, 0.10},
			{"goodput 2x, 4 criticalities ÷ none (paired)", paired(FourLevels, NoLevels, good), 0.95, 1.05},
		},
	}
}

// NeighbourCount is the small tenants beside the big one.
const NeighbourCount = 9

// Neighbour is issue 16's loopback check of a noisy neighbour: one trusted
// tenant offering 5× the capacity beside nine offering 0.3× in all
// (0.033× each), every request CRITICAL. The nine must be served ≥ 99%.
func Neighbour() *Lab {
	const over = "5.3x"
	shares := []load.Share{{Name: BigTenant, Weight: 5}}
	var small []string
	for i := range NeighbourCount {
		n := "n" + strconv.Itoa(i+1)
		small = append(small, n)
		shares = append(shares, load.Share{Name: n, Weight: 0.3 / NeighbourCount})
	}
	nine := ClassServed(over, small...)
	return &Lab{
		Name:  "neighbour",
		Setup: "trusted callers (127.0.0.0/8); tenant from Levee-Tenant: \"big\" with 5/5.3 of the load, n1…n9 with 0.3/5.3 in all; every request CRITICAL",
		Work:  time.Millisecond,
		Steps: []Step{
			{"0.5x", 0.5, 4 * time.Second},
			{over, 5.3, 8 * time.Second},
			{"0.5x-after", 0.5, 5 * time.Second},
		},
		Overload: over,
		Variants: []Variant{{Neighbours, backend.Levee, load.Mix{Tenants: shares}}},
		Trust:    []string{Trusted},
		Figures: []Figure{
			{"served, the nine", nine},
			{"served, big", ClassServed(over, BigTenant)},
			{"goodput 5.3x ÷ capacity", Goodput(over)},
			{"attempts ÷ offered at 5.3x", attempts(over)},
			{"recovery after 5.3x (s)", Recovery(over)},
		},
		Checks: []Check{
			{"served, the nine", median(Neighbours, nine), 0.99, inf},
		},
	}
}

// attempts returns the attempts ÷ the offered requests of phase: how far
// the naive clients' retries multiplied the load.
func attempts(phase string) func(Run) float64 {
	return func(r Run) float64 {
		p, ok := r.Report.Phase(phase)
		if !ok || !(p.OfferedRPS > 0) {
			return 0
		}
		return p.AttemptedRPS / p.OfferedRPS
	}
}
