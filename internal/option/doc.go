// Package option is levee's one convention for option values, shared by
// the policies' functional options (admit, degrade, limit, pressure, retry,
// throttle) so that every package treats and reports a bad value alike:
//
//   - an option not given means its documented default;
//   - a value inside the documented range is taken as given, zero
//     included where the range holds it (no hysteresis, recovery off, run
//     queue off);
//   - zero where it is outside the range (a period, a target, a factor)
//     also means the default, so that a zero field of a caller's own
//     configuration struct can be passed through;
//   - a nil function, logger or controller restores the default;
//   - any other value outside the range is a programming error: a
//     constructor that cannot otherwise fail panics with an *Error naming
//     the package, the option, the value and the range, as time.NewTicker
//     panics on a non-positive interval; a constructor that can fail for
//     reasons of its environment (pressure.NewCPU reads cgroup files)
//     returns it as its error instead.
//
// Values that come from users (configuration files, flags) are checked
// where they are read, so that users see their own field names and lines,
// not a panic.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), option is a
// leaf: it imports the standard library only, and the policies (admit,
// degrade, limit, pressure, retry, throttle) use it for their options.
package option
