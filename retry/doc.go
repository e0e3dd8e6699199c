// Package retry retries failed calls without turning an overload into an
// avalanche.
//
// Retries multiply load: two retries per layer is ×3, two layers ×9, and a
// dependency that is already overloaded is exactly the one that fails. So
// this package retries little and only what can succeed:
//
//   - a Policy (plain struct, zero value = defaults) allows 3 attempts with
//     exponential backoff and full jitter, honours the server's pushback
//     (Retry-After) and never waits past the deadline;
//   - a Budget caps retries across calls at 10% of requests over 10 s plus a
//     floor of 60 per minute; DefaultBudget is shared by every Policy that
//     has none (the one piece of package-level state in levee);
//   - Classify retries only errors that can succeed on retry: Overloaded
//     rejections without NoRetry, quota rejections after their delay,
//     connection refused, errors marked with Retryable or Unsent; never
//     NoRetry, Deadline or Throttled rejections, never a non-idempotent call
//     unless the request provably never left;
//   - when a call gives up on an overloaded dependency, or the budget
//     refuses, the error returned (*GiveUpError) says "overloaded; no-retry"
//     to errors.As, so the layer above does not retry again: only the layer
//     directly above the rejecting one retries.
//
// Do runs a call on real time. Policy.Begin and Attempts.Next are the same
// decisions stepped on explicit time, with randomness from Policy.Rand: the
// simulator and transports use them, and a seeded source makes every
// decision reproducible.
package retry
