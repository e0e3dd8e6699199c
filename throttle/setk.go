package throttle

import (
	"math"

	"github.com/levee-dev/levee/internal/option"
)

// SetK changes K at run time, for a configuration reload: the next
// recomputation of the rejection probabilities (at most 100 ms away) uses
// it. k must be ≥ 1 and finite (WithK's range, without its "0 means the
// default"); otherwise SetK returns an error and changes nothing. A nil *Throttle
// ignores it. Safe for concurrent use; it never makes Allow wait.
func (t *Throttle) SetK(k float64) error {
	if err := checkK(k); err != nil {
		return err
	}
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.k = k
	return nil
}

func checkK(k float64) error {
	if !(k >= 1) || math.IsInf(k, 0) {
		return option.New("throttle", "SetK", "must be in [1, +Inf)", k)
	}
	return nil
}

// SetK changes K for every throttle of the Group and for those it creates
// later (see Throttle.SetK).
func (g *Group) SetK(k float64) error {
	if err := checkK(k); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.cfg.k = k
	for _, e := range g.all {
		e.t.SetK(k)
	}
	return nil
}

// K returns the Throttle's K.
func (t *Throttle) K() float64 {
	if t == nil {
		return DefaultK
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.k
}
