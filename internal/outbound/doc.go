// Package outbound is the client side of levee's protocol edge, shared by
// leveehttp.Transport and leveegrpc's unary and stream client interceptors
// so that every outgoing call is throttled, bounded, retried and judged by
// one loop. It sits among the leaves' users: it is built on the policies
// retry (Attempts: attempts, backoff, budget) and throttle, and only the
// adapters import it.
//
// Call.Run steps one call through its attempts. For each attempt it
//
//  1. refuses locally, without touching the network, when the time left
//     after the margin is under a millisecond (a Deadline rejection) or
//     when the backend's adaptive throttle says so (Throttled);
//  2. gives the attempt its own deadline (retry.Policy.AttemptTimeout)
//     and the time budget to advertise downstream (Left: the time left
//     minus at most DefaultMargin, never more than a tenth of it);
//  3. lets the protocol send it, then reports to the throttle what the
//     outcome says about the backend's load (Judge): overload and quota
//     rejections and attempts that got no answer in time count against
//     it, any answer counts for it, and failures that never reached it
//     (connection refused, DNS, reset) or that its caller abandoned count
//     for nothing;
//  4. asks retry.Attempts whether and when to try again (classification,
//     attempts, deadline, budget), and waits, never past the deadline.
//
// A call that stops on a retryable failure ends with a *retry.GiveUpError,
// which says "overloaded; no-retry" upward for an overload: only the layer
// directly above the rejecting one retries.
package outbound
