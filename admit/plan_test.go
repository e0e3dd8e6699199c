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

func TestBuildPlanTenants(t *testing.T) {
	abuser := fairq.Tenant{Key: 0xA000_0000_0000_0000}
	abuser.Rate[levee.Critical] = 1000
	heavy := fairq.Tenant{Key: 0xB000_0000_0000_0000}
	heavy.Rate[levee.Sheddable] = 60
	var rate [levee.NumCriticalities]float64
	rate[levee.Critical.Rank()] = 1000 + 40
	rate[levee.Sheddable.Rank()] = 60 + 140
	in := planInput{shed: 900, rate: rate, tenants: []fairq.Tenant{abuser, heavy}, fair: 50}
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
		abuserShed, otherShed := 0, 0
		for i := range 10000 {
			if res.p.shed(abuser.Key, r, uint64(i), 0) {
				abuserShed++
			}
			if res.p.shed(0x1234_0000_0000_0000, r, uint64(i), 0) {
				otherShed++
			}
		}
		if abuserShed != 0 || otherShed != 0 {
			t.Errorf("rank %d: abuser shed %d/10000, an unlisted tenant %d/10000; want 0 and 0", r, abuserShed, otherShed)
		}
	}
	n, shed := 100000, 0
	for i := range n {
		if res.p.shed(abuser.Key, levee.Critical.Rank(), uint64(i), 0) {
			shed++
		}
	}
	if got := float64(shed) / float64(n); math.Abs(got-0.9) > 0.001 {
		t.Errorf("abuser CRITICAL shed fraction %v, want 0.9", got)
	}
	for i := range 1000 {
		if res.p.shed(0, levee.Sheddable.Rank(), uint64(i), 0) || res.p.shed(heavy.Key, levee.Sheddable.Rank(), uint64(i), 0) {
			t.Fatalf("a tenant within its share was shed")
		}
	}

	// More to shed than the abuser's excess: the ladder takes the rest, and
	// inside the partly shed SHEDDABLE the tenant above its share goes
	// first.
	in.shed = 900 + 30
	res = buildPlan(in)
	if math.Abs(res.tenantShed-900) > 1e-6 {
		t.Errorf("tenant stage shed %v, want 900 (down to 2 fair shares)", res.tenantShed)
	}
	shedHeavy, shedOther := 0, 0
	for i := range 10000 {
		if res.p.shed(heavy.Key, levee.Sheddable.Rank(), uint64(i), 0) {
			shedHeavy++
		}
		if res.p.shed(0x1234_0000_0000_0000, levee.Sheddable.Rank(), uint64(i), 0) {
			shedOther++
		}
	}
	if shedOther != 0 || math.Abs(float64(shedHeavy)/10000-0.5) > 0.001 {
		t.Errorf("SHEDDABLE: heavy tenant shed %d/10000, others %d/10000; want 5000 and 0", shedHeavy, shedOther)
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
	var tenant fairq.Tenant
	tenant.Key = fairq.Key(fairq.Hash(1, "10.0.0.1"))
	tenant.Rate[levee.Critical] = 15000
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
				res := buildPlan(planInput{shed: 15000 - aim, rate: rate, tenants: []fairq.Tenant{tenant},
					fair: aim, period: 0.05, slack: 0.05 * aim})
				res.p.startTenants(n)
				for i := range perPeriod {
					if !res.p.shed(tenant.Key, levee.Critical.Rank(), n+uint64(i), off) {
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
