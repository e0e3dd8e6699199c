package retry

import (
	"testing"
	"time"
)

// chain models tiers 0 (top) … len(budgets) (bottom) on virtual time. Every
// upper tier calls the one below with its own Policy and Budget; the bottom
// rejects everything as overloaded (retryable). Responses are instant;
// retries happen after their backoff.
type chain struct {
	policies []Policy
	// propagate returns what a tier answers upward after giving up:
	// levee's Attempts.Err (overloaded; no-retry) or, for naive tiers, the
	// raw last error.
	naive  bool
	bottom int
}

func (c *chain) call(tier int, now, deadline time.Time) error {
	if tier == len(c.policies) {
		c.bottom++
		return errOverloaded(0)
	}
	a := c.policies[tier].Begin(now, deadline)
	for {
		err := c.call(tier+1, now, deadline)
		wait, retry := a.Next(now, err)
		if !retry {
			if c.naive {
				return err
			}
			return a.Err()
		}
		now = now.Add(wait)
	}
}

func TestAmplification(t *testing.T) {
	const top = 6000 // 100 requests/s for a minute: 100× the 60/min floor
	tests := []struct {
		name     string
		budget   func() *Budget
		naive    bool
		min, max float64 // bottom requests per top request
	}{
		{"no budgets, errors passed up as-is", Unlimited, true, 27, 27},
		{"budget per tier, errors passed up as-is", func() *Budget { return NewBudget() }, true, 1, 1.4},
		{"levee defaults: budget + no-retry upward", func() *Budget { return NewBudget() }, false, 1, 1.2},
		{"no budgets but no-retry upward", Unlimited, false, 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &chain{naive: tt.naive}
			for i := range 3 {
				c.policies = append(c.policies, Policy{Budget: tt.budget(), Rand: seeded(uint64(i))})
			}
			for i := range top {
				now := t0.Add(time.Duration(i) * 10 * time.Millisecond)
				if err := c.call(0, now, now.Add(DefaultTimeout)); err == nil {
					t.Fatal("a call succeeded against a bottom that rejects everything")
				}
			}
			got := float64(c.bottom) / top
			t.Logf("bottom saw %d requests for %d at the top: ×%.3f", c.bottom, top, got)
			if got < tt.min || got > tt.max {
				t.Errorf("amplification ×%.3f, want in [%.2f, %.2f]", got, tt.min, tt.max)
			}
		})
	}
}
