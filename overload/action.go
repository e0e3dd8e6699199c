package overload

import (
	"strconv"
	"time"

	"github.com/levee-dev/levee"
)

// Action is one thing the Manager does as a resource nears its limit.
// Each starts at a level (WithAction), lasts while the level stays at or
// above it, and ends once the level has been below it for the action's
// cooldown (WithCooldown): a level rises at once, and falls late.
//
//	action          default level  cooldown  what it does
//	Shed            Elevated       1s        raises the admission controller's shed level to
//	                                         at least 1 (Elevated), 2 (High), 3 (Critical):
//	                                         the lowest criticalities first (WithShedFloors)
//	LargeBodies     Elevated       1s        refuses requests whose declared body is larger than
//	                                         1 MiB or whose length is not declared (WithBodyLimit)
//	InFlight        Normal         1s        caps the requests in flight at what the resources that
//	                                         requests hold can take (see below)
//	KeepAlive       High           5s        turns HTTP keep-alive off: new responses close their
//	                                         connection, idle connections are closed
//	Timeouts        High           5s        shortens idle and header timeouts to 1s and 2s
//	                                         (WithTimeouts)
//	CriticalOnly    Critical       1s        refuses every request but CRITICAL_PLUS (health
//	                                         probes never reach the Manager)
//	Collect         High           —         forces a garbage collection when the live-heap
//	                                         reading is older than 500 ms (WithStaleAfter)
//
// CRITICAL_PLUS requests are never refused by the Manager; the adapter
// never shows it health probes. Connections are never refused.
//
// InFlight: a resource with a Goal (memory, goroutines) grows with the
// requests in flight. The Manager learns the line that relates the two
// (reading ≈ base + share × requests, from one-second averages and the
// settled moment with the fewest requests, often the idle start) and caps
// the requests in flight at the number where the line reaches the Goal;
// it also computes the cap from the latest measurement and the requests in
// flight while it may have been taken, and keeps the lower. The cap acts
// on each request as it arrives: a surge is held at the cap at once,
// whatever the lag of the measurement (the live heap is measured once per
// garbage collection). Until the share of a request is known (no settled
// moment with fewer requests yet) a resource caps only from 0.9 of its
// Goal, holding the requests near where they are. SHEDDABLE requests may
// use 80% of the cap, SHEDDABLE_PLUS 90%, CRITICAL all of it
// (WithInFlightShares): the lower criticalities are refused first. The
// action counts as active while the requests in flight come within half
// of the cap; the cap applies whenever it is set.
type Action uint8

// The actions.
const (
	Shed Action = iota
	LargeBodies
	InFlight
	KeepAlive
	Timeouts
	CriticalOnly
	Collect
)

// NumActions is the number of actions.
const NumActions = 7

var actionNames = [NumActions]string{"shed", "large_bodies", "in_flight", "keep_alive_off", "short_timeouts", "critical_only", "collect"}

// String returns the action's snake_case name: "shed", "large_bodies",
// "in_flight", "keep_alive_off", "short_timeouts", "critical_only",
// "collect".
func (a Action) String() string {
	if a < NumActions {
		return actionNames[a]
	}
	return "Action(" + strconv.Itoa(int(a)) + ")"
}

// Actions returns every action, in the order of their constants.
func Actions() [NumActions]Action {
	var out [NumActions]Action
	for i := range out {
		out[i] = Action(i)
	}
	return out
}

// actionConfig is one action's configuration.
type actionConfig struct {
	level    Level
	cooldown time.Duration
}

// defaultActions are the actions' default levels and cooldowns (the table
// in Action's documentation).
var defaultActions = [NumActions]actionConfig{
	Shed:         {Elevated, time.Second},
	LargeBodies:  {Elevated, time.Second},
	InFlight:     {Normal, time.Second},
	KeepAlive:    {High, 5 * time.Second},
	Timeouts:     {High, 5 * time.Second},
	CriticalOnly: {Critical, time.Second},
	Collect:      {High, 0},
}

// Verdict is the Manager's answer to a request (Enter).
type Verdict uint8

// The verdicts.
const (
	// Pass: the request goes on; the caller calls Exit when it ends.
	Pass Verdict = iota
	// RefuseCriticalOnly: the process is at the last level, and only
	// CRITICAL_PLUS requests are served.
	RefuseCriticalOnly
	// RefuseBody: the request's body is larger than the limit, or its
	// length is not declared.
	RefuseBody
	// RefuseInFlight: the requests in flight are at the cap for the
	// request's criticality.
	RefuseInFlight
)

// numVerdicts counts the verdicts, Pass included.
const numVerdicts = 4

var verdictNames = [numVerdicts]string{"pass", "critical_only", "large_body", "in_flight"}

// String returns "pass", "critical_only", "large_body" or "in_flight".
func (v Verdict) String() string {
	if v < numVerdicts {
		return verdictNames[v]
	}
	return "Verdict(" + strconv.Itoa(int(v)) + ")"
}

// Refusals returns the verdicts that refuse a request, in the order of
// their constants.
func Refusals() [numVerdicts - 1]Verdict {
	return [numVerdicts - 1]Verdict{RefuseCriticalOnly, RefuseBody, RefuseInFlight}
}

// errRefused is the rejection of every refusal: overloaded, retry after a
// second (the actions' cooldown). Shared: never modified.
var errRefused = &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: time.Second}

// Err returns the rejection to answer a refused request with (Reason
// Overloaded, RetryAfter 1s; shared, do not modify), nil for Pass.
func (v Verdict) Err() *levee.RejectedError {
	if v == Pass {
		return nil
	}
	return errRefused
}
