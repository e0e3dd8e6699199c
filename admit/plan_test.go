package admit

import (
	"math"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/fairq"
)

func TestBuildPlanLadder(t *testing.T) {
	even := [levee.NumCriticalities]float64{100, 100, 100, 100} // by rank
	tests := []struct {
		name      string
		shed      float64
		wantLevel float64
		wantAll   [levee.NumCriticalities]bool
		wantFrac  [levee.NumCriticalities]float64
	}{
		{"nothing", 0, 0, [4]bool{}, [4]float64{}},
		{"half of SHEDDABLE", 50, 0.5, [4]bool{}, [4]float64{0.5, 0, 0, 0}},
		{"SHEDDABLE and a quarter of SHEDDABLE_PLUS", 125, 1.25, [4]bool{true}, [4]float64{0, 0.25, 0, 0}},
		{"up to CRITICAL", 250, 2.5, [4]bool{true, true}, [4]float64{0, 0, 0.5, 0}},
		{"everything", 1000, 4, [4]bool{true, true, true, true}, [4]float64{}},
	}
	for _, tt := range tests {
		res := buildPlan(planInput{shed: tt.shed, rate: even})
		if math.Abs(res.level-tt.wantLevel) > 1e-9 {
			t.Errorf("%s: level %v, want %v", tt.name, res.level, tt.wantLevel)
		}
		if tt.shed == 0 {
			if res.p != nil {
				t.Errorf("%s: plan published, want none", tt.name)
			}
			continue
		}
		for r := range levee.NumCriticalities {
			if res.p.all[r] != tt.wantAll[r] {
				t.Errorf("%s: rank %d all = %v, want %v", tt.name, r, res.p.all[r], tt.wantAll[r])
			}
			got := float64(res.p.thr[r]) / (1 << 64)
			if math.Abs(got-tt.wantFrac[r]) > 1e-9 {
				t.Errorf("%s: rank %d fraction %v, want %v", tt.name, r, got, tt.wantFrac[r])
			}
		}
	}
}

// unitAt returns a unit sending rate requests per second at criticality c.
func unitAt(key uint64, c levee.Criticality, rate float64) unit {
	var u unit
	u.key = key
	u.rate[c.Rank()] = rate
	return u
}

// admittedOf runs n requests of rank r from key through p, evenly over
// the period starting at from (ns), and returns how many were admitted.
func admittedOf(p *plan, key uint64, r, n int, from int64) int {
	adm := 0
	for i := range n {
		at := from + int64(i)*int64(testPeriod)/int64(n)
		if p.shed(key, 0, 0, r, uint64(i), 0, at, false) == 0 {
			adm++
		}
	}
	return adm
}

const testPeriod = 50 * time.Millisecond

func TestBuildPlanTenants(t *testing.T) {
	abuser := unitAt(0xA000_0000_0000_0000, levee.Critical, 1000)
	heavy := unitAt(0xB000_0000_0000_0000, levee.Sheddable, 60)
	var rate [levee.NumCriticalities]float64
	rate[levee.Critical.Rank()] = 1000 + 40
	rate[levee.Sheddable.Rank()] = 60 + 140
	const period = 0.05
	in := planInput{shed: 900, rate: rate, units: []unit{abuser}, heavy: []unit{heavy}, fair: 50, period: period}
	res := buildPlan(in)
	// The abuser (20 fair shares) loses 900 of its 1000 first; nobody else
	// is touched.
	if math.Abs(res.tenantShed-900) > 1e-6 {
		t.Errorf("tenant stage shed %v, want 900", res.tenantShed)
	}
	if res.level != 0 {
		t.Errorf("ladder level %v, want 0", res.level)
	}
	// The abuser's cut is taken from the rank it sends (CRITICAL) only:
	// its entry must shed none of its requests at the other ranks, and a
	// tenant that is not listed is shed nowhere.
	for r := range levee.NumCriticalities {
		if r == levee.Critical.Rank() {
			continue
		}
		if got := admittedOf(res.p, abuser.key, r, 10000, 0); got != 10000 {
			t.Errorf("rank %d: abuser admitted %d/10000, want all", r, got)
		}
		if got := admittedOf(res.p, 0x1234_0000_0000_0000, r, 10000, 0); got != 10000 {
			t.Errorf("rank %d: an unlisted tenant admitted %d/10000, want all", r, got)
		}
	}
	// It is admitted at 100/s, 5 a period, with a first burst of two
	// periods' worth, whatever it sends; the plans that follow continue
	// the pace (carry); every rejection is counted.
	for _, n := range []int{50, 500} {
		var prev *plan
		adm, cut := 0, uint64(0)
		for i := range 20 {
			res := buildPlan(in)
			res.p.carry(prev, int64(i)*int64(testPeriod))
			adm += admittedOf(res.p, abuser.key, levee.Critical.Rank(), n, int64(i)*int64(testPeriod))
			cut += res.p.find(abuser.key).cut.Load()
			prev = res.p
		}
		if adm < 100 || adm > 110 {
			t.Errorf("abuser sending %d CRITICAL a period for 20 periods: admitted %d, want 100 (and a first burst of ≤ 10)", n, adm)
		}
		if want := uint64(20*n - adm); cut != want {
			t.Errorf("abuser sending %d: tenant-stage rejections counted %d, want %d", n, cut, want)
		}
	}
	if got := admittedOf(res.p, heavy.key, levee.Sheddable.Rank(), 1000, 0); got != 1000 {
		t.Errorf("a tenant within its share admitted %d/1000, want all", got)
	}

	// More to shed than the abuser's excess: the ladder takes the rest, and
	// inside the partly shed SHEDDABLE the tenant above its share goes
	// first.
	in.shed = 900 + 30
	res = buildPlan(in)
	if math.Abs(res.tenantShed-900) > 1e-6 {
		t.Errorf("tenant stage shed %v, want 900 (down to 2 fair shares)", res.tenantShed)
	}
	shedHeavy := 10000 - admittedOf(res.p, heavy.key, levee.Sheddable.Rank(), 10000, 0)
	if math.Abs(float64(shedHeavy)/10000-0.5) > 0.001 {
		t.Errorf("SHEDDABLE: heavy tenant shed %d/10000, want 5000", shedHeavy)
	}
	if b := res.p.budget.Load(); res.p.budgetRank != levee.Sheddable.Rank() || b != 7 {
		t.Errorf("SHEDDABLE: unlisted tenants' budget %d at rank %d, want all of their 140/s × 50 ms = 7 at rank %d", b, res.p.budgetRank, levee.Sheddable.Rank())
	}
}

// TestBudgetCarries: a tenant cut to less than a request a period is
// admitted its share over many periods: each plan continues the previous
// plan's pace.
func TestBudgetCarries(t *testing.T) {
	const period = 0.05
	ab := unitAt(0xA000_0000_0000_0000, levee.Critical, 1000)
	var rate [levee.NumCriticalities]float64
	rate[levee.Critical.Rank()] = 1000
	for _, share := range []float64{0.3, 2, 7.5} { // requests/s the abuser keeps
		var prev *plan
		adm, periods := 0, 200
		for i := range periods {
			res := buildPlan(planInput{shed: 1000 - share, rate: rate, units: []unit{ab}, fair: share / farAbove, period: period})
			res.p.carry(prev, int64(i)*int64(testPeriod))
			adm += admittedOf(res.p, ab.key, levee.Critical.Rank(), 50, int64(i)*int64(testPeriod))
			prev = res.p
		}
		want := share * period * float64(periods)
		if math.Abs(float64(adm)-want) > 1.5 {
			t.Errorf("cut to %v/s: admitted %d over %d periods, want %.0f", share, adm, periods, want)
		}
	}
}

func TestRetryAfterTable(t *testing.T) {
	for _, d := range []float64{1, 1.5, 10, 99, 1000, 1e4, 1e6} {
		want := float64(1e6) * d // ns
		i := raIndex(durationOf(want))
		got := float64(raValue(i))
		if got < want*0.999 || got > want*1.1 {
			t.Errorf("raIndex(%vms) → %vms, want ≥ and within 10%%", d, got/1e6)
		}
	}
}

func durationOf(ns float64) time.Duration { return time.Duration(ns) }

// TestTenantSequenceContinues: a listed tenant admitted at a small share
// (a few requests a period) gets its share over many periods. Each Step
// builds a new plan; restarting the tenant's Weyl sequence at 0 in every
// plan replayed the same first points, whose error then repeated every
// period instead of averaging out. Step continues it from the arrival
// count (startTenants).
func TestTenantSequenceContinues(t *testing.T) {
	const perPeriod = 750 // arrivals a period, all from the listed tenant
	tenant := unitAt(fairq.Key(fairq.Hash(1, "10.0.0.1")), levee.Critical, 15000)
	var rate [levee.NumCriticalities]float64
	rate[levee.Critical.Rank()] = 15000
	// Every controller seed offsets the sequences differently: check many.
	worst := 0.0
	for seed := range uint64(20) {
		off := fairq.Mix(seed)
		for _, aim := range []float64{40, 100, 300} { // 2, 5 and 15 a period
			var admitted int
			var n uint64
			const periods = 40
			for range periods {
				res := buildPlan(planInput{shed: 15000 - aim, rate: rate, heavy: []unit{tenant},
					fair: aim, period: 0.05, slack: 0.05 * aim})
				res.p.startTenants(n)
				for i := range perPeriod {
					if res.p.shed(tenant.key, 0, 0, levee.Critical.Rank(), n+uint64(i), off, 0, false) == 0 {
						admitted++
					}
				}
				n += perPeriod
			}
			want := aim * 0.05 * periods
			worst = max(worst, math.Abs(float64(admitted)-want)/want)
			if math.Abs(float64(admitted)-want) > 0.05*want+1 {
				t.Errorf("seed %d, aim %v/s: admitted %d over %d periods, want %.0f ± 5%%", seed, aim, admitted, periods, want)
			}
		}
	}
	t.Logf("worst relative error over 20 seeds and 3 aims: %.3f", worst)
}

// TestPartialRankShedsRetriesFirst: in the partly shed rank, a retry takes
// from the period's budget only while more than half of it is left: with
// as many retries as first attempts, and budget for 40% of them, first
// attempts get three quarters of it (shedding by request), not half (by
// attempt).
func TestPartialRankShedsRetriesFirst(t *testing.T) {
	var rate [levee.NumCriticalities]float64
	rate[levee.Critical.Rank()] = 2000 // 1000 first attempts and 1000 retries a second
	var firsts, retries int
	for range 20 { // a second: a plan a period, 100 arrivals each, alternating
		res := buildPlan(planInput{shed: 1200, rate: rate, period: 0.05})
		if res.p.budgetRank != levee.Critical.Rank() {
			t.Fatalf("partial rank %d, want CRITICAL's", res.p.budgetRank)
		}
		for i := range 100 {
			retry := i%2 == 1
			if res.p.shed(0, 0, 0, levee.Critical.Rank(), uint64(i), 0, 0, retry) == 0 {
				if retry {
					retries++
				} else {
					firsts++
				}
			}
		}
	}
	if firsts+retries != 800 || firsts < 590 || retries > 210 {
		t.Errorf("admitted %d first attempts and %d retries of 1000 each, want 800 in all, about 600 first attempts", firsts, retries)
	}
}

// TestBuildPlanFloor: a forced level is a floor under every rank's share,
// for unlisted and listed tenants alike; the ladder's own shares above it
// stand, and the partly shed rank keeps its count for unlisted tenants.
func TestBuildPlanFloor(t *testing.T) {
	even := [levee.NumCriticalities]float64{1000, 1000, 1000, 1000} // by rank
	heavy := unitAt(0xB000_0000_0000_0000, levee.Critical, 1000)
	heavy.rate[0] = 500 // and 50 SHEDDABLE
	tests := []struct {
		name      string
		shed      float64
		floor     float64
		heavy     bool
		wantLevel float64
		want      [levee.NumCriticalities]float64 // share shed, unlisted
		wantHeavy [levee.NumCriticalities]float64 // share shed, the listed tenant
	}{
		{"floor alone", 0, 1.5, false, 1.5, [4]float64{1, 0.5, 0, 0}, [4]float64{}},
		{"floor above the ladder's partial rank", 300, 0.5, false, 0.5, [4]float64{0.5, 0, 0, 0}, [4]float64{}},
		{"floor below the ladder", 2300, 1.5, false, 2.3, [4]float64{1, 1, 0.3, 0}, [4]float64{}},
		{"floor on a higher rank than the ladder's", 500, 2.25, false, 2.25, [4]float64{1, 1, 0.25, 0}, [4]float64{}},
		{"everything", 0, 4, false, 4, [4]float64{1, 1, 1, 1}, [4]float64{}},
		{"listed tenant", 0, 2.5, true, 2.5, [4]float64{1, 1, 0.5, 0}, [4]float64{1, 1, 0.5, 0}},
	}
	for _, tt := range tests {
		in := planInput{shed: tt.shed, rate: even, floor: tt.floor, period: 0.05, fair: 200}
		if tt.heavy {
			in.units = []unit{heavy}
			in.shed = 1 // something for the tenant stage
		}
		res := buildPlan(in)
		if math.Abs(res.level-tt.wantLevel) > 0.02 {
			t.Errorf("%s: level %v, want %v", tt.name, res.level, tt.wantLevel)
		}
		const n = 2000
		budget := res.p.budget.Load()
		for r := range levee.NumCriticalities {
			// Unlisted: the partly shed rank is a count for the period.
			got := 1 - float64(admittedOf(res.p, 0x1234_0000_0000_0000, r, n, 0))/n
			if r == res.p.budgetRank {
				got = 1 - float64(budget)/(even[r]*0.05)
			}
			if math.Abs(got-tt.want[r]) > 0.01 {
				t.Errorf("%s: rank %d unlisted shed %.3f, want %.3f", tt.name, r, got, tt.want[r])
			}
			if tt.heavy && r != levee.Critical.Rank() && r != 0 {
				continue
			}
			if tt.heavy {
				got := 1 - float64(admittedOf(res.p, heavy.key, r, n, 0))/n
				if math.Abs(got-tt.wantHeavy[r]) > 0.02 {
					t.Errorf("%s: rank %d listed tenant shed %.3f, want %.3f", tt.name, r, got, tt.wantHeavy[r])
				}
			}
		}
	}
}

// TestCarryInRequests: a plan continues the previous plan's pace in
// requests, not in time. A tenant paced at 0.02/s (an episode entered
// while nothing could be served) and admitted once owes one request: 50 s
// at that pace. When the next plan paces it at 50/s, that is 20 ms, and it
// is admitted again within a period; carried as 50 s, it was refused for
// the rest of the episode.
func TestCarryInRequests(t *testing.T) {
	const period = 0.05
	ab := unitAt(0xA000_0000_0000_0000, levee.Critical, 1000)
	var rate [levee.NumCriticalities]float64
	rate[levee.Critical.Rank()] = 1000
	plan := func(share float64) *plan {
		return buildPlan(planInput{shed: 1000 - share, rate: rate, units: []unit{ab}, fair: share / farAbove, period: period}).p
	}
	slow := plan(0.02)
	if got := admittedOf(slow, ab.key, levee.Critical.Rank(), 50, 0); got < 1 {
		t.Fatalf("paced at 0.02/s: admitted %d of 50, want its first request", got)
	}
	fast := plan(50)
	now := int64(testPeriod)
	fast.carry(slow, now)
	if got := admittedOf(fast, ab.key, levee.Critical.Rank(), 50, now); got < 2 {
		t.Errorf("paced at 50/s after a plan at 0.02/s that admitted one request: admitted %d of 50 a period later, want its burst (the debt of one request is 20 ms now)", got)
	}
	// Its own pace is carried as before: a new plan at the same pace
	// grants no new burst.
	again := plan(50)
	again.carry(fast, now)
	if got := admittedOf(again, ab.key, levee.Critical.Rank(), 50, now); got != 0 {
		t.Errorf("a plan at the same pace, carried at the same instant: admitted %d more, want 0 (no new burst)", got)
	}
}
