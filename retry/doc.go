// Package retry retries failed calls without turning an overload into an
// avalanche.
//
// Retries multiply load: two retries per layer is ×3, two layers ×9, four
// ×81, and the dependency that fails is usually the one already
// overloaded. So this package retries little, only what can succeed, and
// never from more than one layer:
//
//   - Policy (a plain struct; the zero value means the defaults) allows 3
//     attempts with exponential backoff and full jitter (equal, decorrelated
//     and none as options; the founding text's 3s→6s→12s is Base 3s,
//     NoJitter), waits max(backoff, server pushback) and never past the
//     deadline, and bounds a call without a deadline by DefaultTimeout.
//   - Budget caps retries across calls: 10% of requests over 10 s plus a
//     floor of 60 per minute, lock-free and allocation-free. DefaultBudget
//     is shared by every Policy that names none — the founding text's
//     per-process budget and the one piece of package-level state in levee.
//   - Classify retries only what can succeed on retry: Overloaded
//     rejections without NoRetry, quota rejections after their delay,
//     connection refused, errors marked with Retryable or Unsent. Never a
//     NoRetry, Deadline or Throttled rejection, never an unknown error, never
//     a call marked NotIdempotent unless the request provably never left
//     (Unsent).
//   - A call that gives up on an overloaded dependency, or whose retry the
//     budget refuses, returns a *GiveUpError that says "overloaded;
//     no-retry" to errors.As (and matches ErrBudgetExhausted when the budget
//     refused). A mid-tier that passes it upward stops every layer above
//     from retrying: only the layer directly above the rejecting one
//     retries. Modelled in this package's tests: a 4-tier chain whose
//     bottom rejects everything sees ×27 the top's requests with naive
//     retries and ×1.11 with these defaults.
//
// Do runs a call on real time, passing the attempt number (for the
// Levee-Attempt header) as an argument and in levee.Call.Attempt.
// Policy.Begin (or Attempts.Init, without allocation) and Attempts.Next are
// the same decisions stepped on explicit time, with randomness drawn only
// from Policy.Rand: the simulator and the transports use them, and a seeded
// source makes every decision reproducible. Transports set
// Policy.NotIdempotent per request (a POST without an idempotency key) and
// wrap errors that prove nothing was sent with Unsent.
//
// # Bad values
//
// NewBudget's options follow levee's one convention: an option not given,
// or given zero where zero is outside its range (a window), means its
// documented default; a value inside the range is taken as given (ratio 0
// or floor 0 turns that part off); any other value is a programming error,
// and NewBudget panics with a message naming the option, the value and the
// range, as time.NewTicker does. Policy is a plain value read on every
// call, where a panic would fail a request rather than a start-up: its
// zero fields mean the defaults, and each field documents what an
// out-of-range value counts as.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), retry is a
// policy: it imports the standard library, package levee and the internal
// leaves only; the client adapters (leveehttp's Transport, leveegrpc's client
// interceptors) and the simulator in tools/ drive it.
package retry
