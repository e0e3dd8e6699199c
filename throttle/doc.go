// Package throttle is client-side adaptive throttling after the Google SRE
// book (ch. 21, "Handling Overload"), made to recover in seconds.
//
// A request refused by the client costs the backend nothing. When a backend
// rejects for overload, its clients should stop sending most of what it
// would reject, using only what they see themselves: no coordination, no
// extra dependency, no added latency.
//
// # Goals
//
//   - The SRE book's steady state: offering R ≫ A requests per window to a
//     backend that accepts A, the backend receives ≈ K·A (K = 2 by default:
//     the client rejects 80% locally at R = 10A and the backend rejects
//     half of what it gets; K = 1.1: ≈ 89% and ≈ 9%). Formula and Simulate
//     state these numbers and measure them on virtual time.
//   - Fast recovery: once the backend accepts again, local rejections fade
//     within seconds, not the tens of seconds a 2-minute memory needs (a
//     30 s spike at 3× leaves the plain SRE throttle rejecting ≈ 30%
//     locally for the next 10 s and some for 40 s; this package: below 5%
//     after 1 s), also after an outage that made it refuse everything (10
//     s, 150 s or 30 min of "overloaded": below 5% within 2 s, where the
//     plain formula took 93–96 s after 150 s).
//   - Lower criticalities are throttled first.
//   - A decision costs about as much as one atomic add: no lock, no
//     allocation, no system call on the accept path.
//   - Deterministic: decisions are stepped with explicit time (AllowAt,
//     DoneAt) and a seeded counter replaces randomness, so the simulator
//     replays the same run from the same seed.
//
// # Non-goals
//
//   - Protecting the backend: servers shed for themselves (package admit).
//     The throttle only saves the work of rejecting, and the network.
//   - Retrying: a locally throttled request fails at once with
//     Reason Throttled and must not be retried (package retry knows).
//   - Deciding what counts as accepted: the caller reports every outcome
//     to DoneAt, accepted unless the backend rejected it for overload or
//     quota; application errors are accepted (the backend did the work).
//
// # The model in ten lines
//
//	per backend key, per criticality c: requests R_c (counted when their
//	    outcome is known: local rejections at once, which is what makes
//	    it converge; sent requests at DoneAt) and accepts A_c (DoneAt
//	    with accepted), kept over two horizons:
//	  long:   a sliding window of 2 min (24 buckets), the SRE book's
//	  recent: exponentially decayed, time constant 1 s (stretched to hold
//	          ~20 accepts when the backend accepts only a few per second)
//	per horizon: deficit D = ΣR − K·ΣA (+ 5% of ΣR on the recent one), handed
//	    out lowest criticality first: P(c) = take_c / (R_c + 1), take_c =
//	    min(R_c, what D left after the lower levels); recent P = 0 when the
//	    backend rejected none of the ≥ 10 requests sent in the recent horizon
//	P(c) = min(P_long(c), P_recent(c)), recomputed every 100 ms
//	AllowAt: n_c++; reject iff (seed + n_c·⌊2⁶⁴/φ⌋) mod 2⁶⁴ < P(c)·2⁶⁴,
//	    unless P(c) ≥ 0.95 and nothing of c was sent for 200 ms (a probe)
//	a run of n accepts in a row spanning ≥ 1 s, with base^n < 10⁻⁵ (base:
//	    the backend's acceptance of sends at its last rejection), forgets
//	    both horizons
//
// With one criticality in use and one horizon this is exactly the book's
// P = max(0, (requests − K·accepts) / (requests + 1)).
//
// # Why two horizons, and the smaller of the two
//
// The deficit a long window holds is history: after the backend recovers,
// every request in the window that was not accepted keeps pushing P up until
// it slides out or is paid back by new accepts at (K−1) per request, which
// is the ~30 s tail of the plain window. A short window alone would forget
// at once but is noisy at low rates and reacts to any short run of
// rejections. Rejecting only what both horizons call for
// keeps the book's behaviour where it was right — onset needs the 2-minute
// evidence, a blip cannot trigger it, the steady state is the same — and
// forgets as soon as the last second shows the backend accepting. Two
// details keep the steady state exact: the recent estimate must be lower by
// more than a 5% slack to win (a backend that accepts in bursts, such as a
// per-second quota, makes it wobble within each second, and the bare
// minimum let ≈7% more through), and the recent horizon is stretched for
// backends that accept only a few requests per second. Measured on virtual
// time (Simulate), what reaches the backend is within 0.2% of K·A from 3 to
// 1000 accepts per second for evenly spaced arrivals, K = 2 and K = 1.1;
// with Poisson arrivals within 0.3% from 100 accepts per second up, and at
// 10 accepts per second within 0.2% for K = 2 but +2 to +4% for K = 1.1.
//
// The formula alone recovers slowly from a throttle that rejected a large
// share: the client learns that the backend recovered only from what it
// sends, and what it sends grows by at most a factor K per horizon (K = 1.1
// needs ~10 horizons after a 3× spike). But in an overloaded steady state
// the backend always rejects a share 1 − 1/K of what it receives, so a
// recent horizon in which it rejected nothing means the deficit is the
// client's own doing: it is forgotten at once. If the backend was in fact
// still short of capacity its first rejections restore the formula within
// one tick. Measured: after 5 minutes at 10×, local rejections are below 5%
// within 5 s of the load returning to the capacity (K = 2); after a 30 s spike at
// 3×, after 1 s (K = 2) and 4 s (K = 1.1).
//
// That needs sends, and a throttle that refuses nearly everything (an
// outage; an overload far beyond 10×) sends about one request per window:
// after 150 s of "overloaded" the plain formula refused 99.9% of requests
// for another 93–96 s. So while it refuses more than 95% of a criticality,
// at least one request of that criticality goes every 200 ms as a probe (at
// most 5 a second per backend and criticality; none while the formula
// sends on its own, so the steady state at 10× is the book's). And an old
// outage in the 2-minute window must not outvote what the last second
// shows: a run of accepts in a row is a sequential test against the
// backend's acceptance when it last rejected (base: about 0 in an outage,
// 1/K in an overloaded steady state). A run whose probability under that
// acceptance is below 10⁻⁵ and that spans at least the recent horizon
// (a per-second quota accepts its first requests of every second in a
// row) means the backend recovered: both horizons are forgotten and the
// formula starts again from what comes next. After an outage three
// accepted probes suffice; after a spike at K = 2, 17 accepts; at K = 1.1,
// 121 (measured: below 5% local rejections within 2 s after every outage
// and spike at K = 2, within 4 s after a spike at K = 1.1; the steady
// state at 10× within ±0.5% of K·A over seeds).
//
// A recent horizon of ~1 s suits a backend that answers within a few
// hundred milliseconds; WithRecovery changes it (0 restores the plain SRE
// throttle). Accepts are counted when the response arrives, so requests in
// flight look unaccepted: a backend slower than the horizon delays the
// forgetting (never the reverse).
//
// # Criticality
//
// The deficit is computed over all criticalities together — they share the
// backend's capacity — and assigned to the lowest criticality first, as the
// server sheds: Sheddable requests are refused locally before any
// SheddablePlus one, and so on. With a criticality-aware backend (levee's
// admit) the lower levels are also the ones it rejects, so their accepts
// fall first and the deficit lands on them anyway. Per-level formulas
// would not do better: a level the ladder refuses entirely gathers no
// accepts and would stay refused long after the backend recovered.
//
// # Counting at the outcome
//
// The book counts a request when it is sent. Then every request in flight
// is a request without an accept, and the deficit a client sees grows
// with the backend's latency: a fresh client sending half the capacity of
// a healthy backend that answers in 300 ms rejected 58% of its requests
// locally in its first second and 21% in the next (measured on virtual
// time), and at 1 s latency it took seven seconds to stop. Here a sent
// request counts when the caller reports its outcome (DoneAt), so only
// answered requests weigh on the formula, whatever the latency; a local
// rejection counts at once, as in the book. An attempt whose caller gave
// up before the answer may go unreported: it counts for nothing.
//
// # Clock
//
// AllowAt and DoneAt take the time. A time read from the clock (time.Now,
// with its monotonic reading) is measured on the monotonic clock, so that
// a step of the wall clock neither freezes nor floods the windows (a 1 h
// step back used to freeze the probabilities, a healthy backend then
// throttled at 99.9%); virtual times are taken as they are. Allow and Done
// read a shared coarse clock (an atomic timestamp refreshed every 2 ms by one goroutine
// that runs only while a Throttle is used on real time and exits after a
// second without readers), because reading the system clock costs more
// than the decision itself.
//
// Group keeps one Throttle per backend key in bounded memory; Stats exports
// the counters for metrics.
//
// # Options
//
// Options follow levee's one convention for bad values: an option not
// given, or given zero where zero is outside its range (K, the window, the
// Group's size), means its documented default; a value inside the range
// is taken as given (WithRecovery(0) turns the recent horizon off); any
// other value is a programming error, and New or NewGroup panics with a
// message naming the option, the value and the range, as time.NewTicker
// does. Check values that come from users where they are read.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), throttle is a
// policy: it imports the standard library, package levee and the internal
// leaves only; the client adapters and the simulator in tools/ drive it, and
// leveeprom exports its counters.
package throttle
