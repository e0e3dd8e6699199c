package admit

import (
	"context"
	"math"
	"sync"
	"time"

	"github.com/levee-dev/levee/degrade"
)

// Controller is a server-side admission controller. See the package
// documentation for the model.
type Controller struct {
	cfg config
	mu  sync.Mutex
	snap Snapshot
}

// New returns a Controller configured by opts.
func New(opts ...Option) *Controller {
	cfg := config{period: DefaultPeriod}
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.degrade == nil {
		cfg.degrade = degrade.New()
	}
	return &Controller{cfg: cfg}
}

// Ticket is an admitted request. Call Done once the work is finished. The
// zero Ticket's Done is a no-op.
type Ticket struct {
	c    *Controller
	done bool
}

// Done reports the outcome (nil: success). It is idempotent.
func (t *Ticket) Done(err error) {
	if t.c == nil || t.done {
		return
	}
	t.done = true
}

// DoneAt is Done at the given time, for virtual time.
func (t *Ticket) DoneAt(now time.Time, err error) { t.Done(err) }

// DegradeLevel returns the degradation level at admission.
func (t *Ticket) DegradeLevel() degrade.Level {
	if t.c == nil {
		return 0
	}
	return t.c.cfg.degrade.Level()
}

// Admit decides whether to start the request described by ctx.
func (c *Controller) Admit(ctx context.Context) (Ticket, error) { return c.AdmitAt(ctx, time.Time{}) }

// AdmitAt is Admit at the given time.
func (c *Controller) AdmitAt(ctx context.Context, now time.Time) (Ticket, error) {
	return Ticket{c: c}, nil
}

// Step runs one control period.
func (c *Controller) Step(now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.snap.Time = now
	c.snap.Signals = c.snap.Signals[:0]
	load := 0.0
	for _, s := range c.cfg.signals {
		v, t := s.Value(), s.Target()
		c.snap.Signals = append(c.snap.Signals, SignalState{s.Name(), v, t})
		if !math.IsNaN(v) && t > 0 {
			load = max(load, v/t)
		}
	}
	c.snap.Load = load
	c.snap.DegradeLevel = c.cfg.degrade.StepAt(now, load)
}

// Run calls Step every period until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(c.cfg.period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-t.C:
			c.Step(now)
		}
	}
}

// Snapshot returns the current state.
func (c *Controller) Snapshot() Snapshot {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.snap
	s.Signals = append([]SignalState(nil), s.Signals...)
	return s
}

// Load returns the maximum over signals of value ÷ target.
func (c *Controller) Load() float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snap.Load
}

// Degrade returns the degradation controller.
func (c *Controller) Degrade() *degrade.Controller { return c.cfg.degrade }
