// Package overload is levee's overload manager: what a Go server does,
// beyond rejecting a request, as one of its own limits nears — memory
// against GOMEMLIMIT or the cgroup's limit, the garbage collector's share
// of the CPU, goroutines against a ceiling, open descriptors against
// RLIMIT_NOFILE. Envoy's overload manager is the model (resource monitors,
// triggers with hysteresis, actions such as turning keep-alive off and
// shrinking timeouts); the actions here are those of a Go HTTP server.
//
// # Goals
//
//   - The process refuses work instead of dying: a process killed for
//     its memory moves its load onto its peers (the avalanche of levee's
//     founding text), and a process out of descriptors cannot even answer
//     its health probes.
//   - The lowest criticalities are sacrificed first; health probes and
//     CRITICAL_PLUS requests never are, and connections are never
//     refused.
//   - Every action reverts by itself: with hysteresis when the pressure
//     passes, and within a few periods if the Manager stops.
//
// Non-goals: steering the admitted rate to a target and estimating
// capacity: package admit does, from the CPU, scheduler-latency,
// queue-delay and concurrency signals. The signals of a hard limit
// (memory, GC, goroutines, descriptors) lag admission and are not rates
// (package pressure says why): they are the Manager's, which acts on them
// with the request gate and the actions where admission steers.
//
// # The model
//
//	resources   each reads a value against thresholds for Elevated, High
//	            and Critical, entered at the threshold and left below the
//	            threshold less a margin (Resource)
//	level       the highest of the resources' levels, at every step
//	actions     each active from its level on, ending once the level has
//	            stayed below it for the action's cooldown (Action)
//	requests    Enter asks the request gate (InFlight, LargeBodies,
//	            CriticalOnly), Exit ends the request
//	effectors   apply the rest: the admission controller's shed floor
//	            (Shedder), an HTTP server's keep-alive and timeouts
//	            (leveehttp.Overload), the garbage collector (Collect)
//
// The Manager is a state machine stepped with an explicit time (Step; Run
// with real time), each stage a function of its previous state and its
// inputs: levelFor (a resource's level with hysteresis), hold.step (an
// action's cooldown), capFor (the InFlight cap a resource allows). Its
// state after a step (State) lasts until a few periods later: a Manager
// whose goroutine stops leaves no refusal, floor or timeout behind.
//
// # How the parts fit
//
// pressure.Default samples the signals; Resources(set) turns the memory,
// GC, goroutine and descriptor signals into resources; the admission
// controller is the Shedder; leveehttp.NewOverload puts the gate on the
// request path and applies keep-alive and timeouts to an http.Server:
//
//	set, _ := pressure.Default(pressure.WithGoroutineLimit(10000))
//	go set.Run(ctx)
//	ctl := admit.New(admit.WithSignals(set.CPU, set.Sched, set.Queue, set.Concurrency))
//	m := overload.New(overload.WithResources(overload.Resources(set)...),
//		overload.WithShedder(ctl), // a Shedder: admit's OverloadShed
//		overload.WithLogger(slog.Default()))
//	go m.Run(ctx)
//
// leveehttp.Protect does all of this from the configuration's overload
// section (package config), whose reloads call Reconfigure: the actions'
// levels and cooldowns and the resources' thresholds (WithThresholds)
// change while the Manager runs.
//
// Costs: Enter and Exit are one atomic load and one atomic add while no
// action concerns requests, a time reading and a few compares more
// otherwise, and never allocate (BenchmarkEnterExit). A step reads each
// resource (the memory signal's reading and the collection count, under
// a microsecond) and allocates the new gate only while an action concerns
// requests.
//
// # Layers
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only, checked by .ci/layers), overload is a
// policy: it imports the standard library, package levee, pressure (whose
// signals are its resources) and the internal leaves only, and forces admit's
// shed level through the Shedder interface rather than importing admit.
// leveehttp puts its gate in front of a server (NewOverload), leveeprom and
// leveeotel export it through internal/instrument, and the simulator in tools/
// runs it on virtual time.
package overload
