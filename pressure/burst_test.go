package pressure

import (
	"math"
	"testing"
	"time"
)

// TestBurstStep: the spell's rules, one interval at a time.
func TestBurstStep(t *testing.T) {
	const target, level, allowance = 0.1, 0.5, 2 * time.Second
	dt := 100 * time.Millisecond
	type in struct {
		v        float64
		shedding bool
	}
	cases := []struct {
		name  string
		steps []in
		want  []float64 // the target each step returns
	}{
		{"below half the target: no spell",
			[]in{{0.04, false}, {0.05, false}}, []float64{target, target}},
		{"a rise while not shedding: the burst level",
			[]in{{0.06, false}, {0.3, false}, {0.45, false}}, []float64{level, level, level}},
		{"a rise that starts while shedding: the target throughout",
			[]in{{0.06, true}, {0.3, false}, {0.45, false}}, []float64{target, target, target}},
		{"shedding once the spell runs keeps it",
			[]in{{0.06, false}, {0.3, true}}, []float64{level, level}},
		{"a fall below half the target ends the spell; a new rise starts another",
			[]in{{0.06, false}, {0.04, false}, {0.06, false}}, []float64{level, target, level}},
		{"NaN ends the spell",
			[]in{{0.06, false}, {math.NaN(), false}}, []float64{level, target}},
	}
	for _, c := range cases {
		var s burst
		for i, x := range c.steps {
			if got := s.step(dt, x.v, target, level, allowance, x.shedding); got != c.want[i] {
				t.Errorf("%s: step %d (%.2f): %.2f, want %.2f", c.name, i, x.v, got, c.want[i])
			}
		}
	}

	// The allowance: 20 intervals of 100 ms at the level, 20 on a slope
	// back to the target, then the target until the queue falls.
	var s burst
	for i := range 45 {
		got := s.step(dt, 0.3, target, level, allowance, false)
		want := level
		switch {
		case i >= 39:
			want = target
		case i >= 20:
			want = target + (level-target)*float64(39-i)/20
		}
		if math.Abs(got-want) > 1e-9 || s.active() != (i < 39) {
			t.Fatalf("interval %d: %.4f (active %v), want %.4f", i, got, s.active(), want)
		}
	}
	if s.step(dt, 0.04, target, level, allowance, false); s.on {
		t.Errorf("after the queue fell: %+v, want no spell", s)
	}
	if s.step(-time.Hour, 0.3, target, level, allowance, false); !s.active() || s.age != 0 {
		t.Errorf("a backward clock step: %+v, want a spell of age 0", s)
	}
	if got := s.step(time.Hour, 0.3, target, level, allowance, false); got != target || s.active() {
		t.Errorf("a forward clock step of an hour: %.2f, want the target (the allowance spent)", got)
	}

	// No level (no budget, or one not above the target): the target.
	s = burst{}
	if got := s.step(dt, 0.3, target, 0, allowance, false); got != target || s.active() {
		t.Errorf("no burst level: %.2f, active %v; want the target", got, s.active())
	}
	s = burst{}
	if got := s.step(dt, 0.3, target, target/2, allowance, false); got != target {
		t.Errorf("a level below the target: %.2f, want the target", got)
	}
}

// TestBurstLevelAndAllowance: half the budget within the ceiling; twice
// the budget within [1 s, 5 s].
func TestBurstLevelAndAllowance(t *testing.T) {
	for _, c := range []struct {
		budget    time.Duration
		level     float64
		allowance time.Duration
	}{
		{0, 0, burstAllowanceMin},
		{100 * time.Millisecond, 0.05, burstAllowanceMin},
		{time.Second, 0.5, 2 * time.Second},
		{10 * time.Second, 1, burstAllowanceMax},
		{time.Hour, 1, burstAllowanceMax},
	} {
		if l := burstLevel(c.budget, 1); l != c.level {
			t.Errorf("budget %v: level %.3f, want %.3f", c.budget, l, c.level)
		}
		if a := burstAllowance(c.budget); a != c.allowance {
			t.Errorf("budget %v: allowance %v, want %v", c.budget, a, c.allowance)
		}
	}
}

// TestQueueDelayBurst: a queue that rises while the controller does not
// shed is held to half the callers' budget for the allowance, then to the
// learned target; one that rises while it sheds, or without a budget, to
// the target at once.
func TestQueueDelayBurst(t *testing.T) {
	const ms = time.Millisecond
	at := time.Unix(0, 0)
	newQ := func(budget time.Duration) *QueueDelay {
		q := NewQueueDelay(WithQueueBudget(func() time.Duration { return budget }))
		at = at.Add(time.Hour)
		q.SampleAt(at) // the first interval
		return q
	}
	interval := func(q *QueueDelay, wait time.Duration) QueueReading {
		q.Observe(wait)
		at = at.Add(100 * ms)
		q.SampleAt(at)
		return q.Reading()
	}
	// No CPU source: the target is 100 ms; with 1 s budgets, the level is
	// 500 ms and the allowance 2 s.
	q := newQ(time.Second)
	if r := interval(q, 40*ms); r.Target != 0.1 || r.Burst || q.Bursting() {
		t.Fatalf("a 40 ms queue: target %.3f, burst %v; want 0.1 and no burst", r.Target, r.Burst)
	}
	for i := range 20 {
		r := interval(q, time.Duration(60+15*i)*ms) // rising to 345 ms
		if r.Target != 0.5 || !r.Burst || !q.Bursting() || r.Value/r.Target >= 1 {
			t.Fatalf("interval %d of a rising queue (%.0f ms): target %.3f, burst %v; want 0.5 and a burst", i, r.Value*1e3, r.Target, r.Burst)
		}
	}
	last := 0.5
	for i := range 19 { // past the 2 s allowance: a slope back to 0.1 over 2 s
		r := interval(q, 350*ms)
		if !(r.Target < last && r.Target > 0.1) || !r.Burst {
			t.Fatalf("interval %d past the allowance: target %.3f after %.3f, burst %v; want falling towards 0.1", i, r.Target, last, r.Burst)
		}
		last = r.Target
	}
	if r := interval(q, 350*ms); r.Target != 0.1 || r.Burst || q.Bursting() {
		t.Errorf("4 s into the spell: target %.3f, burst %v; want 0.1", r.Target, r.Burst)
	}
	interval(q, 10*ms) // drained: the spell ends
	if r := interval(q, 200*ms); r.Target != 0.5 {
		t.Errorf("a new rise after the queue drained: target %.3f, want 0.5", r.Target)
	}

	q = newQ(time.Second)
	q.SetShedding(true)
	if r := interval(q, 200*ms); r.Target != 0.1 || r.Burst {
		t.Errorf("a rise while the controller sheds: target %.3f, burst %v; want 0.1", r.Target, r.Burst)
	}
	q.SetShedding(false)
	if r := interval(q, 200*ms); r.Target != 0.1 {
		t.Errorf("the same spell once shedding stopped: target %.3f, want 0.1", r.Target)
	}

	q = newQ(0)
	if r := interval(q, 200*ms); r.Target != 0.1 || r.Burst {
		t.Errorf("no learned budget: target %.3f, burst %v; want 0.1", r.Target, r.Burst)
	}

	q = NewQueueDelay(WithQueueBudget(func() time.Duration { return time.Second }), WithQueueTarget(20*ms))
	q.SampleAt(at)
	if r := interval(q, 200*ms); r.Target != 0.02 || r.Burst {
		t.Errorf("a fixed target: %.3f, burst %v; want 0.02 and no burst", r.Target, r.Burst)
	}
}

// TestConcurrencyBurst: requests that pile up inside the handler because
// more arrive, while the handler completes as many as before, may wait up
// to half the callers' budget for the allowance; when the completions
// fall (a dependency slowed), the latency target holds at once.
func TestConcurrencyBurst(t *testing.T) {
	burst := func(l *learner, from, periods int, ends int64) (r ConcurrencyReading) {
		for i := range periods {
			l.stepFlow(float64(from+20*i), 40, ends, true) // 40 start, ends finish each 50 ms
			r = l.st.readingAt(time.Time{})
		}
		return r
	}
	l := quietLearner()
	l.st.budget = 1 // 1 s budgets: half of it drains 200 requests at 400/s
	for range 20 {
		l.stepFlow(2, 20, 20, true)
	}
	r := burst(l, 22, 8, 20) // 20 more start than end: 22 → 162 in flight
	if !r.Burst || r.Value >= 1 || r.Allowed < 150 {
		t.Errorf("a burst, the completions keeping pace: burst %v, allowed %.0f, value %.2f; want a burst, ≥ 150, < 1", r.Burst, r.Allowed, r.Value)
	}
	for range 40 {
		l.stepFlow(162, 20, 20, true)
	}
	if r := l.st.readingAt(time.Time{}); r.Burst {
		t.Errorf("the queue still standing at 160 2 s later: burst %v (allowed %.0f); want the allowance spent", r.Burst, r.Allowed)
	}

	l = quietLearner()
	l.st.budget = 1
	for range 20 {
		l.stepFlow(2, 20, 20, true)
	}
	r = burst(l, 22, 4, 4) // the same rise, but 4 end where 20 did
	if r.Burst || r.Value <= 1 {
		t.Errorf("completions falling fivefold: burst %v, allowed %.0f, value %.2f; want no burst, > 1", r.Burst, r.Allowed, r.Value)
	}

	l = quietLearner()
	for range 20 {
		l.stepFlow(2, 20, 20, true)
	}
	if r := burst(l, 22, 4, 20); r.Burst {
		t.Errorf("no learned budget: burst %v, allowed %.0f; want none", r.Burst, r.Allowed)
	}
}
