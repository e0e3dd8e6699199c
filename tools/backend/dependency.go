package backend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/pressure"
)

// Dependency is a downstream service reached through a pool of
// connections, as a database behind database/sql or an HTTP client with
// a connection limit is: a call takes one of the pool's connections, in
// the order the callers came, holds it for the dependency's latency and
// gives it back. The latency follows a schedule from the first call, so
// that a dependency can slow down and recover in the middle of a run. A
// call never looks at its caller's context: like most handlers, it does
// its work for a caller that has gone. Safe for concurrent use.
type Dependency struct {
	pool  chan struct{}
	steps []DependencyStep
	start atomic.Int64 // unix ns of the first call
}

// DependencyStep is one stretch of a dependency's schedule: Latency until
// Until after the first call (0: for the rest of the run).
type DependencyStep struct {
	Until   time.Duration
	Latency time.Duration
}

// NewDependency returns a dependency with pool connections and the given
// schedule (at least one step; the last one lasts). Each call's latency is
// the step's ±20%, uniformly.
func NewDependency(pool int, steps ...DependencyStep) *Dependency {
	if pool < 1 || len(steps) == 0 {
		panic(fmt.Sprintf("backend: NewDependency(%d, %d steps): need a pool ≥ 1 and a step", pool, len(steps)))
	}
	return &Dependency{pool: make(chan struct{}, pool), steps: steps}
}

// Latency returns the scheduled latency at since after the first call.
func (d *Dependency) Latency(since time.Duration) time.Duration {
	for _, s := range d.steps {
		if s.Until == 0 || since < s.Until {
			return s.Latency
		}
	}
	return d.steps[len(d.steps)-1].Latency
}

// Call waits for a connection, holds it for the scheduled latency and
// gives it back.
func (d *Dependency) Call() {
	now := time.Now()
	d.start.CompareAndSwap(0, now.UnixNano())
	d.pool <- struct{}{}
	lat := d.Latency(now.Sub(time.Unix(0, d.start.Load())))
	time.Sleep(time.Duration(float64(lat) * (0.8 + 0.4*rand.Float64())))
	<-d.pool
}

// DependencyHandler is the service of issue 16's slow-dependency shape:
// each request calls dep, then runs app (Handler: the CPU the request
// burns, and the counting of the run — late if its client's deadline has
// passed by then).
func DependencyHandler(dep *Dependency, app http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dep.Call()
		app.ServeHTTP(w, r)
	})
}

// ConcurrencyHandler reports h's requests to the concurrency signal c:
// StartAt when h starts, with the time left to the request's deadline,
// and DoneAt when it returns. It stands in for leveehttp until the
// handler calls the signal itself.
func ConcurrencyHandler(c *pressure.Concurrency, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		var budget time.Duration
		if dl, ok := r.Context().Deadline(); ok {
			budget = dl.Sub(now)
		}
		s := c.StartAt(now, budget)
		defer func() { c.DoneAt(s, time.Now(), 0) }()
		h.ServeHTTP(w, r)
	})
}

// LeveeWithConcurrency is a Wrap: app behind leveehttp.NewHandler with an
// admit.Controller fed by pressure.Default's signals, the concurrency
// signal among them told of every request (ConcurrencyHandler inside the
// admission run queue). Its control loops run as long as the process.
func LeveeWithConcurrency(app http.Handler) http.Handler {
	set, err := pressure.Default()
	if err != nil {
		panic("backend: " + err.Error())
	}
	ctrl := admit.New(admit.WithSignals(set.Signals()...))
	go set.Run(context.Background())
	go ctrl.Run(context.Background())
	return leveehttp.NewHandler(ConcurrencyHandler(set.Concurrency, app), ctrl, leveehttp.WithQueueDelay(set.Queue))
}

// EnvSlowDependency names the environment variable that gives the
// backend processes of a slow-dependency run their dependency's schedule:
// "fast,slow" durations (for example "10s,20s"): 5 ms for fast, 50 ms for
// slow, 5 ms after.
const EnvSlowDependency = "LEVEE_SLOW_DEPENDENCY"

// SlowDependency returns the dependency of issue 16's shape: 8
// connections, 5 ms, then 50 ms, then 5 ms again, the first two
// stretches as long as EnvSlowDependency says (default "10s,20s").
func SlowDependency() (*Dependency, error) {
	fast, slow := 10*time.Second, 20*time.Second
	if v := os.Getenv(EnvSlowDependency); v != "" {
		a, b, ok := strings.Cut(v, ",")
		f, err1 := time.ParseDuration(a)
		s, err2 := time.ParseDuration(b)
		if !ok || err1 != nil || err2 != nil || f <= 0 || s <= 0 {
			return nil, fmt.Errorf("backend: %s=%q: want two positive durations, \"fast,slow\"", EnvSlowDependency, v)
		}
		fast, slow = f, s
	}
	return NewDependency(8,
		DependencyStep{Until: fast, Latency: 5 * time.Millisecond},
		DependencyStep{Until: fast + slow, Latency: 50 * time.Millisecond},
		DependencyStep{Latency: 5 * time.Millisecond},
	), nil
}

// SlowDependencyWrap returns a Wrap that puts SlowDependency in front of
// app (DependencyHandler) and protect around the two (nil: nothing), for
// loopback.HijackWith.
func SlowDependencyWrap(protect Wrap) Wrap {
	return func(app http.Handler) http.Handler {
		dep, err := SlowDependency()
		if err != nil {
			panic(err)
		}
		h := DependencyHandler(dep, app)
		if protect != nil {
			h = protect(h)
		}
		return h
	}
}
