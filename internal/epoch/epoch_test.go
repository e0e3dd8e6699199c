package epoch

import (
	"testing"
	"time"
)

func TestMicros(t *testing.T) {
	tests := []struct {
		t    time.Time
		want int64
	}{
		{time.Unix(0, 0), 0},
		{time.Unix(1, 999), 1_000_000},
		{time.Unix(-1, 500_000_000), -500_000},
		{time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), -62135596800 * 1e6},
		{time.Date(9999, 12, 31, 23, 59, 59, 999_999_999, time.UTC), 253402300799*1e6 + 999_999},
	}
	for _, tt := range tests {
		if got := Micros(tt.t); got != tt.want {
			t.Errorf("Micros(%v) = %d, want %d", tt.t, got, tt.want)
		}
	}
}

func TestBucket(t *testing.T) {
	tests := []struct{ us, width, want int64 }{
		{0, 10, 0},
		{9, 10, 0},
		{10, 10, 1},
		{-1, 10, -1},
		{-10, 10, -1},
		{-11, 10, -2},
		{-62135596800 * 1e6, 100_000, -621355968000},
	}
	for _, tt := range tests {
		if got := Bucket(tt.us, tt.width); got != tt.want {
			t.Errorf("Bucket(%d, %d) = %d, want %d", tt.us, tt.width, got, tt.want)
		}
	}
}

func TestSlot(t *testing.T) {
	tests := []struct {
		i, n int64
		want int
	}{
		{0, 10, 0}, {9, 10, 9}, {10, 10, 0}, {-1, 10, 9}, {-10, 10, 0}, {-11, 24, 13},
	}
	for _, tt := range tests {
		if got := Slot(tt.i, tt.n); got != tt.want {
			t.Errorf("Slot(%d, %d) = %d, want %d", tt.i, tt.n, got, tt.want)
		}
	}
}

// TestMicrosMonotonic: a time read from the clock is measured on the
// monotonic clock (its difference to another such time is Sub's, which Go
// computes from the monotonic readings alone), anchored at the process's
// wall time; the same instant without its monotonic reading converts as
// wall time, within the drift between the two clocks since the start.
func TestMicrosMonotonic(t *testing.T) {
	a := time.Now()
	b := a.Add(90 * time.Minute) // keeps the monotonic reading
	if got := Micros(b) - Micros(a); got != (90 * time.Minute).Microseconds() {
		t.Errorf("Micros difference %d µs, want %d", got, (90 * time.Minute).Microseconds())
	}
	if got := Micros(a) - (startMicros + a.Sub(start).Microseconds()); got != 0 {
		t.Errorf("Micros(now) off the monotonic anchor by %d µs", got)
	}
	if d := Micros(a) - Micros(a.Round(0)); d < -1e6 || d > 1e6 {
		t.Errorf("monotonic and wall readings of one instant differ by %d µs, want well under a second", d)
	}
	if Micros(a.Round(0)) != wallMicros(a.Round(0)) {
		t.Error("a time without a monotonic reading was not converted as wall time")
	}
}
