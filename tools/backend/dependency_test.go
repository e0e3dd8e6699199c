package backend

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/levee-dev/levee/pressure"
)

func TestDependencySchedule(t *testing.T) {
	d := NewDependency(8,
		DependencyStep{Until: 10 * time.Second, Latency: 5 * time.Millisecond},
		DependencyStep{Until: 30 * time.Second, Latency: 50 * time.Millisecond},
		DependencyStep{Latency: 5 * time.Millisecond})
	for _, tt := range []struct{ at, want time.Duration }{
		{0, 5 * time.Millisecond}, {9 * time.Second, 5 * time.Millisecond},
		{10 * time.Second, 50 * time.Millisecond}, {29 * time.Second, 50 * time.Millisecond},
		{30 * time.Second, 5 * time.Millisecond}, {time.Hour, 5 * time.Millisecond},
	} {
		if got := d.Latency(tt.at); got != tt.want {
			t.Errorf("Latency(%v) = %v; want %v", tt.at, got, tt.want)
		}
	}
	t.Setenv(EnvSlowDependency, "2s,3s")
	s, err := SlowDependency()
	if err != nil || s.Latency(time.Second) != 5*time.Millisecond || s.Latency(4*time.Second) != 50*time.Millisecond || s.Latency(5*time.Second) != 5*time.Millisecond {
		t.Errorf("SlowDependency with %s=2s,3s: %v", EnvSlowDependency, err)
	}
	t.Setenv(EnvSlowDependency, "2s")
	if _, err := SlowDependency(); err == nil {
		t.Errorf("SlowDependency accepted %s=2s", EnvSlowDependency)
	}
}

// TestDependencyPool: on synctest's virtual clock, calls beyond the pool
// wait for a connection: 8 calls on 2 connections of 40–60 ms take four
// rounds.
func TestDependencyPool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := NewDependency(2, DependencyStep{Latency: 50 * time.Millisecond})
		start := time.Now()
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(d.Call)
		}
		wg.Wait()
		if got := time.Since(start); got < 160*time.Millisecond || got > 240*time.Millisecond {
			t.Errorf("8 calls on 2 connections of 50ms ±20%% took %v; want four rounds", got)
		}
	})
}

// TestConcurrencyHandler: the stand-in reports every request to the
// concurrency signal, with the budget of the request's deadline.
func TestConcurrencyHandler(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := pressure.NewConcurrency()
		release := make(chan struct{})
		h := ConcurrencyHandler(c, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release }))
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() { h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil)) })
		}
		synctest.Wait()
		if got := c.InFlight(); got != 3 {
			t.Errorf("InFlight = %d with three requests in the handler; want 3", got)
		}
		close(release)
		wg.Wait()
		if got := c.InFlight(); got != 0 {
			t.Errorf("InFlight = %d after they returned; want 0", got)
		}
	})
}
