// Package sim is levee's discrete-event simulator: it shows on virtual time
// how an overload turns into an avalanche — retries multiplying load ×3, ×9,
// ×27, ×81, a crashed instance's load falling on its peer, a metastable
// collapse that outlives its trigger — and how levee's protections stop it.
//
// The simulator holds no protection logic of its own. Every protective
// decision is made by levee's real policy code, stepped with virtual time
// and seeded randomness: admit.Controller decides admission on each
// protected instance (fed by pressure.CPU reading the instance's busy
// core-time and pressure.QueueDelay observing each request's wait for a
// core), retry.Attempts decides every retry of every caller (naive callers
// are retry.Policy values with NoJitter and retry.Unlimited budgets, every
// error marked retryable), and throttle.Throttle decides client-side
// throttling. What the simulator models is plain mechanics: Poisson
// arrivals, criticality and tenant mixes, FIFO queues in front of a number
// of cores, service-time distributions, memory limits that crash an
// instance, restarts and cold starts, load balancers (round robin, least
// in-flight, active/standby failover) with optional health-check kills,
// downstream calls, slowdowns and site losses. Work whose caller has gone
// still costs CPU unless the server drops it; levee's admission drops it.
//
// Model in ten lines:
//
//	client population --(Poisson, phases)--> call --attempt--> LB --> instance
//	instance: queue -> core (admit first if protected) -> CPU time -> [downstream call] -> response
//	in-flight > memory limit => crash: every job lost, callers see resets, restart after a delay, cold start
//	caller: attempt timer | response -> retry.Attempts.Next decides -> backoff event -> next attempt
//	throttle.AllowAt before each attempt; DoneAt with its outcome, accepted unless overload
//	admit.Step every control period; pressure signals sampled at the same virtual instants
//	signals: Default's that a simulated instance has — CPU, queue delay, concurrency (budgets from the deadlines)
//
// A Scenario is decoded from YAML by Parse (errors name the line); Run
// simulates its runs and returns a Report in the vocabulary of levee's
// DESIGN.md (offered, attempted, throttled, goodput, rejected, failed per
// phase; crashes and why; outage and recovery times; wasted work), with
// WriteTable and WriteHTML to present it. The same scenario and seed give a
// byte-identical JSON encoding of the Report.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), sim is a tool in the tools module
// (github.com/levee-dev/levee/tools): it imports the policies themselves
// (admit, pressure, retry, throttle, overload) and fleet, and no adapter,
// since it drives them on virtual time; tools/report and tools/report/chart
// present its results, go.yaml.in/yaml/v3 reads its scenarios, and only the
// command in cmd/ imports it.
package sim
