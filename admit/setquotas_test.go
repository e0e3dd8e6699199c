package admit_test

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/admit"
)

// admitN admits n requests of tenant at now and returns how many passed.
func admitN(ctl *admit.Controller, tenant string, now time.Time, n int) int {
	ctx := levee.WithCall(context.Background(), levee.Call{Tenant: tenant})
	ok := 0
	for range n {
		if tk, err := ctl.AdmitAt(ctx, now); err == nil {
			ok++
			tk.DoneAt(now, nil)
		}
	}
	return ok
}

// TestSetQuotas: the set is replaced whole; a tenant whose quota is
// unchanged keeps its bucket (an exhausted bucket stays exhausted), a
// changed or new one starts full, one left out is no longer limited, and
// a quota that WithQuota would refuse leaves the tenant its previous one
// and is logged.
func TestSetQuotas(t *testing.T) {
	logs := &recordLog{}
	a := admit.Quota{Rate: 1, Burst: 3}
	ctl := admit.New(admit.WithQuota("a", a), admit.WithLogger(slog.New(logs)))
	now := t0
	if got := admitN(ctl, "a", now, 10); got != 3 {
		t.Fatalf("a admitted %d at once with burst 3, want 3", got)
	}
	steps := []struct {
		name  string
		set   map[string]admit.Quota
		want  map[string]int // admitted of 10 at once, right after
		quota map[string]admit.Quota
	}{
		{"a unchanged keeps its empty bucket; b new",
			map[string]admit.Quota{"a": a, "b": {Rate: 1, Burst: 2}},
			map[string]int{"a": 0, "b": 2, "c": 10},
			map[string]admit.Quota{"a": a, "b": {Rate: 1, Burst: 2}}},
		{"a changed starts full; b removed",
			map[string]admit.Quota{"a": {Rate: 1, Burst: 5}},
			map[string]int{"a": 5, "b": 10},
			map[string]admit.Quota{"a": {Rate: 1, Burst: 5}}},
		{"bad quotas keep the previous ones",
			map[string]admit.Quota{"a": {Rate: math.NaN()}, "b": {Rate: -1}, "": {Rate: 1}, "c": {Rate: 1, Burst: 1}},
			map[string]int{"a": 0, "b": 10, "c": 1},
			map[string]admit.Quota{"a": {Rate: 1, Burst: 5}, "c": {Rate: 1, Burst: 1}}},
		{"nil removes every quota",
			nil,
			map[string]int{"a": 10, "c": 10},
			map[string]admit.Quota{}},
	}
	for _, st := range steps {
		ctl.SetQuotas(st.set)
		for tenant, want := range st.want {
			if got := admitN(ctl, tenant, now, 10); got != want {
				t.Errorf("%s: %s admitted %d of 10, want %d", st.name, tenant, got, want)
			}
		}
		if got := ctl.Quotas(); fmt.Sprint(got) != fmt.Sprint(st.quota) {
			t.Errorf("%s: Quotas() = %v, want %v", st.name, got, st.quota)
		}
	}
	if got := len(logs.messages("admit: SetQuotas: quota not applied, the tenant keeps its previous one")); got != 3 {
		t.Errorf("%d problems logged, want 3 (a, b and the empty tenant)", got)
	}
	if s := ctl.Snapshot(); s.Rejected[levee.Critical][levee.Quota] == 0 {
		t.Error("quota rejections not counted")
	}
}

// TestSetQuotasUnderLoad: Admit never sees a half-replaced set, and the
// race detector sees no unsynchronised access, while SetQuotas runs
// beside it.
func TestSetQuotasUnderLoad(t *testing.T) {
	ctl := admit.New(admit.WithQuota("a", admit.Quota{Rate: 1e9}))
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for range 2 {
		wg.Go(func() {
			ctx := levee.WithCall(context.Background(), levee.Call{Tenant: "a"})
			for {
				select {
				case <-stop:
					return
				default:
				}
				if tk, err := ctl.Admit(ctx); err == nil {
					tk.Done(nil)
				}
			}
		})
	}
	for i := range 200 {
		ctl.SetQuotas(map[string]admit.Quota{"a": {Rate: 1e9 + float64(i%2)}, fmt.Sprint("t", i): {Rate: 1}})
	}
	close(stop)
	wg.Wait()
	if q := ctl.Quotas(); len(q) != 2 {
		t.Errorf("Quotas() = %v, want the last set of 2", q)
	}
}
