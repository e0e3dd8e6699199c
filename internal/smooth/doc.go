// Package smooth is levee's one exponential smoothing, used wherever a
// reading, a rate or a count is averaged over time: the pressure signals,
// the throttle's recent horizon, the adaptive limits, the tenant tracker
// and the admission controller's rates.
//
// Every smoothing in levee has a time constant tau: after a step change of
// its input, an average has moved 1 − 1/e ≈ 63% of the way after tau, 86%
// after 2·tau and 95% after 3·tau, however often it is updated. A sample
// taken dt after the previous one therefore weighs
//
//	alpha = 1 − exp(−dt/tau)
//
// so that readings at uneven intervals (a sampler that ran late, a control
// step that was skipped) weigh by the time they cover. Three forms serve
// the callers:
//
//   - EWMA, a value with its time constant, for one smoothed reading
//     (the pressure signals);
//   - Alpha and Toward, for many values that share one time step (the
//     controller's per-criticality rates, the tenant table): compute the
//     weight once per step, then move each value with Toward;
//   - Decay, the factor exp(−dt/tau) by which an exponentially decayed sum
//     or count shrinks over dt (the throttle's recent horizon, the tenant
//     table's eviction counts): sum = sum·Decay(dt, tau) + new.
//
// A smoothing counted in samples rather than time (the adaptive limit's
// long RTT average, weight 2/(n+1) per window) uses Toward with that
// weight.
//
// The functions are pure and allocation-free; an EWMA is not safe for
// concurrent use (each is owned by one sampler). This package depends on
// the standard library only.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), smooth is a
// leaf: it imports the standard library only, and the policies and leaves
// above it use it (pressure, throttle, limit and fairq; admit's controller
// is to follow).
package smooth
