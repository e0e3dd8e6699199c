package epoch

import "time"

// Micros returns t as microseconds since 1970-01-01 UTC (negative before),
// exact for every year from 1 to 9999.
//
// A time read from the clock (time.Now, whose result carries a monotonic
// reading) is measured on the monotonic clock instead: as the wall time at
// the process's start plus the monotonic time since. A step of the wall
// clock (NTP, an operator, a VM resumed) then neither freezes the windows
// built on it (a step back: every bucket looks like the future) nor empties
// them (a step forward). Virtual times, which carry no monotonic reading,
// are converted as they are.
func Micros(t time.Time) int64 {
	if t != t.Round(0) { // only a monotonic reading makes them differ
		return startMicros + int64(t.Sub(start)/time.Microsecond)
	}
	return wallMicros(t)
}

func wallMicros(t time.Time) int64 { return t.Unix()*1e6 + int64(t.Nanosecond()/1e3) }

// start anchors the times read from the clock; set once, never modified.
var (
	start       = time.Now()
	startMicros = wallMicros(start)
)

// Bucket returns the index of the bucket of width microseconds (width > 0)
// that holds us: ⌊us / width⌋, rounded down for negative us as well.
func Bucket(us, width int64) int64 {
	q := us / width
	if us%width != 0 && (us < 0) != (width < 0) {
		q--
	}
	return q
}

// Slot returns the place of bucket index i in a ring of n buckets (n > 0):
// i mod n in [0, n), for negative i as well.
func Slot(i, n int64) int { return int((i%n + n) % n) }
