package admit_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// countingLimiter admits the first allow requests of each call sequence and
// records what Admit asked.
type countingLimiter struct {
	allow   int
	calls   int
	tenants []string
	crits   []levee.Criticality
	wait    time.Duration
}

func (l *countingLimiter) Allow(tenant string, c levee.Criticality, now time.Time) (time.Duration, bool) {
	l.calls++
	if l.tenants != nil {
		l.tenants = append(l.tenants, tenant)
		l.crits = append(l.crits, c)
	}
	if l.calls <= l.allow {
		return 0, true
	}
	return l.wait, false
}

func TestTenantLimiter(t *testing.T) {
	lim := &countingLimiter{allow: 2, wait: 300 * time.Millisecond, tenants: []string{}}
	ctl := admit.New(
		admit.WithQuota("local", admit.Quota{Rate: 1, Burst: 1}),
		admit.WithTenantLimiter(lim),
	)
	now := time.Unix(1000, 0)
	call := func(tenant string, c levee.Criticality) error {
		ctx := levee.WithCall(context.Background(), levee.Call{Tenant: tenant, Criticality: c})
		tk, err := ctl.AdmitAt(ctx, now)
		tk.DoneAt(now, nil)
		return err
	}
	tests := []struct {
		name     string
		tenant   string
		crit     levee.Criticality
		wantErr  bool
		wantCall int // limiter calls after this request
	}{
		{"no tenant: limiter not asked", "", levee.Critical, false, 0},
		{"first request: admitted", "a", levee.Sheddable, false, 1},
		{"local quota passes, limiter admits", "local", levee.Critical, false, 2},
		{"local quota refuses first: limiter not asked", "local", levee.Critical, true, 2},
		{"limiter refuses", "a", levee.CriticalPlus, true, 3},
	}
	for _, tt := range tests {
		err := call(tt.tenant, tt.crit)
		if (err != nil) != tt.wantErr {
			t.Fatalf("%s: err = %v, want error %v", tt.name, err, tt.wantErr)
		}
		if lim.calls != tt.wantCall {
			t.Fatalf("%s: limiter called %d times, want %d", tt.name, lim.calls, tt.wantCall)
		}
		var re *levee.RejectedError
		if tt.wantErr && (!errors.As(err, &re) || re.Reason != levee.Quota) {
			t.Fatalf("%s: err = %v, want a quota rejection", tt.name, err)
		}
	}
	if got, want := lim.tenants, []string{"a", "local", "a"}; len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("limiter saw tenants %q, want %q", got, want)
	}
	if got := lim.crits[2]; got != levee.CriticalPlus {
		t.Errorf("limiter saw criticality %v, want CRITICAL_PLUS", got)
	}
	// The last rejection carries the limiter's wait, rounded up to the
	// preallocated table (8 steps per doubling).
	err := call("a", levee.Critical)
	var re *levee.RejectedError
	if !errors.As(err, &re) || re.RetryAfter < lim.wait || re.RetryAfter > lim.wait*110/100 {
		t.Errorf("RetryAfter = %v, want %v rounded up by at most 10%%", re.RetryAfter, lim.wait)
	}
	s := ctl.Snapshot()
	if got := s.Rejected[levee.Critical][levee.Quota] + s.Rejected[levee.CriticalPlus][levee.Quota]; got != 3 {
		t.Errorf("quota rejections counted = %d, want 3 (one local, two from the limiter)", got)
	}
}

// allowAll is a TenantLimiter that admits everything without allocating.
type allowAll struct{}

func (allowAll) Allow(string, levee.Criticality, time.Time) (time.Duration, bool) { return 0, true }

func TestTenantLimiterDoesNotAllocate(t *testing.T) {
	ctl := admit.New(admit.WithSignals(newFixedSignal(0.4, 0.8)), admit.WithTenantLimiter(allowAll{}))
	ctl.Step(time.Now())
	ctx := acceptCtx(t, levee.Critical)
	got := testing.AllocsPerRun(1000, func() {
		tk, err := ctl.Admit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		tk.Done(nil)
	})
	if got != 0 {
		t.Errorf("%v allocs per Admit+Done with a tenant limiter, want 0", got)
	}
}
