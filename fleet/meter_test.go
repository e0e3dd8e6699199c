package fleet

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// fakeCPU is a process CPU clock advanced by hand.
type fakeCPU struct{ d time.Duration }

func (c *fakeCPU) read() (time.Duration, error) { return c.d, nil }

func TestMeterDividesCPUByWallTime(t *testing.T) {
	tests := []struct {
		name       string
		background time.Duration // CPU per period outside any handler
		given      time.Duration // cost per request of route "given" (Charge)
	}{
		{"handlers only", 0, 0},
		{"with background work", 100 * time.Millisecond, 0},
		{"with given costs", 0, 3 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cpu := &fakeCPU{}
			l, err := New(Config{Tenants: map[string]Quota{"a": {Cores: 10}, "b": {Cores: 10}}}, WithCPU(cpu.read), WithInstance("x"))
			if err != nil {
				t.Fatal(err)
			}
			now := time.Unix(0, 0)
			l.BeginRound(now) // the CPU reader's baseline
			// Each period: a runs 100 cheap requests (1 ms of CPU, 1.25 ms
			// of wall time each), b 50 expensive ones (4 ms, 5 ms).
			for range 10 {
				for range 100 {
					l.Record("a", "cheap", 1250*time.Microsecond)
					cpu.d += time.Millisecond
				}
				for range 50 {
					l.Record("b", "expensive", 5*time.Millisecond)
					cpu.d += 4 * time.Millisecond
				}
				if tt.given > 0 {
					for range 10 {
						l.Charge("a", "given", tt.given)
						cpu.d += tt.given
					}
				}
				cpu.d += tt.background
				now = now.Add(time.Second)
				l.BeginRound(now)
			}
			s := l.Snapshot()
			a, _ := s.Tenant("a")
			b, _ := s.Tenant("b")
			per := func(ts TenantSnapshot, route string) float64 {
				for _, r := range ts.Routes {
					if r.Route == route {
						return r.CostCoreSeconds / float64(r.Requests)
					}
				}
				t.Fatalf("%s has no route %s", ts.Name, route)
				return 0
			}
			// Background CPU is spread over the handlers by wall time:
			// 0.1 s over 0.375 s of wall time per period.
			scale := 1 + tt.background.Seconds()/0.3
			if got, want := per(a, "cheap"), 0.001*scale; math.Abs(got-want) > 1e-3*want {
				t.Errorf("cheap route: %.6f core-s per request, want %.6f", got, want)
			}
			if got, want := per(b, "expensive"), 0.004*scale; math.Abs(got-want) > 1e-3*want {
				t.Errorf("expensive route: %.6f core-s per request, want %.6f", got, want)
			}
			if tt.given > 0 {
				if got, want := per(a, "given"), tt.given.Seconds(); math.Abs(got-want) > 1e-9 {
					t.Errorf("given route: %.6f core-s per request, want %.6f", got, want)
				}
			}
			if got, want := s.CPUSeconds, cpu.d.Seconds(); math.Abs(got-want) > 1e-6 {
				t.Errorf("metered %.4f core-s in all, want the process's %.4f", got, want)
			}
		})
	}
}

func TestMeterRoutesBounded(t *testing.T) {
	l, err := New(Config{}, WithCPU(nil))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		l.Charge("x", fmt.Sprintf("/r%d", i), time.Millisecond)
	}
	l.BeginRound(time.Unix(1, 0))
	s := l.Snapshot()
	d, _ := s.Tenant("")
	var n uint64
	other := false
	for _, r := range d.Routes {
		n += r.Requests
		other = other || r.Route == OtherRoute
	}
	if len(d.Routes) != routeSlots+1 || !other || n != 100 {
		t.Errorf("100 routes metered as %d routes (other %v) holding %d requests; want %d + %q holding 100",
			len(d.Routes), other, n, routeSlots, OtherRoute)
	}
}

func TestMeterDoesNotAllocate(t *testing.T) {
	l, err := New(Config{Tenants: map[string]Quota{"a": {Cores: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	l.Start("a", "/x").End() // the tenant's first span allocates its meters
	got := testing.AllocsPerRun(1000, func() {
		sp := l.Start("a", "/x")
		sp.End()
		l.Start("unknown", "/y").EndCost(time.Millisecond)
	})
	if got != 0 {
		t.Errorf("%v allocs per Start+End, want 0", got)
	}
}
