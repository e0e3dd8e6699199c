package epoch

import "time"

// Micros returns t as microseconds since 1970-01-01 UTC (negative before),
// exact for every year from 1 to 9999.
func Micros(t time.Time) int64 { return t.Unix()*1e6 + int64(t.Nanosecond()/1e3) }

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
