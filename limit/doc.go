// Package limit computes adaptive concurrency limits: how many requests a
// server (or a client, towards one dependency) should have in flight at
// once, learned from the round-trip times it observes.
//
// # Goal
//
// Catch a slowing dependency while CPU stays low. When a database or a
// downstream service slows down, requests pile up in flight and wait; the
// process's CPU falls rather than rises, so CPU-based shedding sees nothing.
// A concurrency limit that shrinks when latency grows turns that pile-up into
// a bound a client can enforce towards one dependency. (The server's own
// signal for it, pressure.Concurrency, learns the no-wait service time and
// reads the requests waiting in the handler instead: a limit learned from
// latency alone cannot tell a dependency that got slower from one that is
// queued behind, and ratchets down in the first case.)
//
// # Model
//
// A Limiter is pure: it holds no clock, no goroutine and no lock. The caller
// aggregates one sample window and calls Update(now, rtt, inflight) once per
// window with the window's round-trip time and its peak in-flight count. Limit returns the
// current limit.
//
//   - Gradient (after Netflix's concurrency-limits "gradient2"): compares the
//     window's RTT with a slow moving average of past RTTs. While the window
//     is no slower than Tolerance × the average, the limit grows by about
//     √limit per window; when it is slower, the limit is multiplied by
//     the gradient Tolerance·long/short (never below ½ per window). Changes
//     are smoothed (Smoothing) and the limit does not grow while the server
//     uses less than half of it (no evidence that more would be served).
//     The gradient reacts to change: an RTT that stays high becomes the new
//     baseline over about LongWindow windows and the limit grows again.
//   - AIMD (TCP-style): additive increase by 1 per window while RTT stays
//     under a threshold and the limit is in use, multiplicative decrease
//     (Backoff) when RTT exceeds it. The threshold is fixed (WithThreshold)
//     or Tolerance × the minimum RTT of the last MinRTTWindow of time.
//
// Both follow demand at once: after a window whose RTT was healthy (no
// decrease) the limit is at least ⌈Tolerance × peak in-flight⌉, since that
// many requests were just served well. A limit used as a signal (the
// requests above it still run) must not read a healthy traffic step as
// overload; a limit that enforces itself gains at most Tolerance× per
// window.
//
// # Non-goals
//
// Limiters do not queue or reject requests; their caller decides what to
// do above the limit. They are not safe for concurrent use: one goroutine
// (the sampler) calls Update; Limit may be read from the same goroutine.
//
// # Options
//
// Both limiters take the same Option type; options that do not apply to a
// limiter are ignored by it. Options follow levee's one convention for bad
// values: an option not given, or given zero where zero is outside its
// range, means its documented default (WithThreshold(0) is in range: the
// adaptive threshold); any other value out of its documented range is a
// programming error and makes the constructor panic with a message naming
// the option, the value and the range, as time.NewTicker does for a
// non-positive period. Check values that come from users where they are
// read.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), limit is a
// policy: it imports the standard library and the internal leaves only;
// pressure.Concurrency turns a limit into a signal, and the adapters and
// tools build on both.
package limit
