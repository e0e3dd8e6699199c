// Package epoch is the integer time base of levee's lock-free windows (the
// retry budget's ring, the throttle's ticks and buckets): a time as
// microseconds since 1970, valid for every year from 1 to 9999, the index
// of the fixed-width bucket that holds it, and that bucket's slot in a
// ring.
//
// time.Time.UnixNano overflows outside the years 1678 to 2262, and a
// virtual clock may start at the zero time (year 1); microseconds in an
// int64 cover ±292,000 years. Integer division rounds toward zero, which
// would put the microseconds just before and just after 1970 in the same
// bucket; Bucket rounds down.
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools
// → commands; imports point down only, checked by .ci/layers), epoch is a
// leaf: it imports the standard library only, and the policies (retry,
// throttle) use it.
package epoch
