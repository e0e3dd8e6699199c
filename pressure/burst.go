package pressure

import (
	"math"
	"time"
)

// burst lets a queue that rises while admission does not shed grow to
// what the callers' deadlines allow for a while before it counts as
// standing. The queue-delay signal applies it to the wait before the
// handlers, the concurrency signal to the requests waiting inside them.
//
// The targets catch a standing queue within a few intervals: under a
// lasting overload a longer queue serves nothing more and adds latency.
// A burst is different. Load at 1.4 times the capacity for a second, then
// 0.4 for a second, is 0.9 of it on average; the unprotected server
// queues the burst (400 ms of work on one core of 1 ms requests) and
// serves all of it in time within 1 s budgets, while a 100 ms target
// refused a quarter of every burst, 14 % of the requests (the simulator,
// one core of exponential 1 ms requests: levee 0.857 of the unprotected
// goodput). Those refusals bought nothing: the server idled in the quiet
// second that could have run them.
//
// So a queue whose reading rises above burstRise (half) of its target
// while the controller does not shed starts a spell, held to the burst
// level instead of the target — half the callers' median budget, within
// the target's ceiling: a wait that leaves a request half its time — for
// at most the burst allowance, twice that budget within
// [burstAllowanceMin, burstAllowanceMax]. The spell ends when the reading
// falls below half the target again. A spell that outlasts its allowance
// is held to a level that falls back to the target over another
// allowance, and then to the target; one that starts while the
// controller sheds, to the target at once. A lasting overload costs at
// most the allowance at the burst level's latency, and another on the
// way down, its requests served in time meanwhile. The way down is a
// slope, not a step: dropped at once from the level to the target, the
// queue read several times its target and the controller cut the
// admitted rate to drain it — two protected tiers before one queue (a
// gateway and its backend) both did, and served less at 2× than without
// the burst rule. The half is where package admit's rule starts to ask a
// queue whether a busy CPU is overloaded (at three quarters of the
// target): a burst must be seen before that, not after. Without a learned
// budget there is no burst level (nothing says what fits). The budget is
// learned when handlers start, after the wait, so a standing burst
// shortens it: with callers that give B, the level settles at B ÷ 3.
//
// As an attacker: callers move the budget (its median, as the
// concurrency signal learns it) and so the burst level, never past the
// target's ceiling (1 s by default); a flood holds the queue at the burst
// level for at most burstAllowanceMax, then meets the target until its
// queue drains; no spell starts while the controller sheds, so a flood
// cannot renew the allowance by pulsing through an episode.
type burst struct {
	on    bool          // a spell is running
	spent bool          // ... held to the target
	age   time.Duration // ... for this long
}

// Burst allowance bounds (see burst).
const (
	burstAllowanceMin = 1 * time.Second
	burstAllowanceMax = 5 * time.Second
	burstRise         = 0.5
)

// burstLevel returns the wait a burst may reach for callers whose median
// budget is b, within ceiling; 0 when b is unknown.
func burstLevel(b time.Duration, ceiling float64) float64 {
	if b <= 0 {
		return 0
	}
	return math.Min(ceiling, b.Seconds()/2)
}

// burstAllowance returns how long a spell may last at the burst level for
// callers whose median budget is b.
func burstAllowance(b time.Duration) time.Duration {
	return min(max(2*b, burstAllowanceMin), burstAllowanceMax)
}

// active reports that the current spell is held to the burst level.
func (s *burst) active() bool { return s.on && !s.spent }

// step takes an interval dt long whose reading is v against target, the
// burst level and allowance, and whether the controller sheds; it
// returns the target the reading is to be held to: the level for the
// allowance, then one falling linearly back to the target over another
// allowance, then the target.
func (s *burst) step(dt time.Duration, v, target, level float64, allowance time.Duration, shedding bool) float64 {
	if !(v > burstRise*target) {
		*s = burst{}
		return target
	}
	if !s.on {
		*s = burst{on: true, spent: shedding || !(level > target)}
	}
	s.age += max(dt, 0)
	if s.spent {
		return target
	}
	if s.age <= allowance {
		return level
	}
	f := 1 - float64(s.age-allowance)/float64(max(allowance, 1))
	if !(f > 0 && level > target) {
		s.spent = true
		return target
	}
	return target + (level-target)*f
}
