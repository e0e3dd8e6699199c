// Package degrade decides when a service should degrade gracefully — serve
// a cheaper answer — before its admission controller starts rejecting
// requests.
//
// A Controller turns the load (the maximum over resource signals of
// value ÷ target, 1.0 being the point where package admit starts shedding)
// into a Level: 0 normal, 1..Max degraded. Levels are entered at a lower
// target than shedding (default 0.85 of it), so degradation comes first,
// and left with hysteresis and a hold time so they do not flap. Handlers read
// the level from their request context with FromContext (the HTTP and gRPC
// adapters put admit's Ticket.DegradeLevel there) and decide what a degraded
// answer is.
//
// Degraded code paths rot when they are never run, so Force sets a level for
// a drill and the drill ends on its own at the given time.
//
// Options follow levee's one convention for bad values: an option not
// given, or given zero where zero is outside its range (the target, the
// highest level), means its documented default; a value inside the range
// is taken as given (no hysteresis, no hold); any other value is a
// programming error, and New panics with a message naming the option, the
// value and the range, as time.NewTicker does. Check values that come from
// users where they are read.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), degrade is a
// policy: it imports the standard library and the internal leaves only; admit
// steps it, and the adapters put its level into each request's context.
package degrade
