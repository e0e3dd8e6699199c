package smooth_test

import (
	"fmt"
	"time"

	"github.com/levee-dev/levee/internal/smooth"
)

func Example() {
	// A reading sampled every 100 ms, smoothed with a 200 ms time constant:
	// a step from 0 to 1 shows 63% after 200 ms and 95% after 600 ms.
	e := smooth.EWMA{Tau: 200 * time.Millisecond}
	e.Update(0, 0)
	for i := 1; i <= 6; i++ {
		v := e.Update(1, 100*time.Millisecond)
		if i%2 == 0 {
			fmt.Printf("after %v: %.2f\n", time.Duration(i)*100*time.Millisecond, v)
		}
	}
	// Output:
	// after 200ms: 0.63
	// after 400ms: 0.86
	// after 600ms: 0.95
}

func ExampleAlpha() {
	// Many rates that share one control step: the weight is computed once.
	rates := []float64{10, 200, 3000}
	arrived := []float64{20, 100, 3000}
	a := smooth.Alpha(50*time.Millisecond, time.Second)
	for i := range rates {
		rates[i] = smooth.Toward(rates[i], arrived[i], a)
	}
	fmt.Printf("alpha %.4f: %.2f %.2f %.2f\n", a, rates[0], rates[1], rates[2])
	// Output:
	// alpha 0.0488: 10.49 195.12 3000.00
}

func ExampleDecay() {
	// A count that forgets with a 1 s time constant, fed 10 events every
	// 100 ms: it settles near rate × tau = 100/s × 1 s (exactly
	// 10 / (1 − e^−0.1) ≈ 105 for whole ticks).
	var recent float64
	for range 100 {
		recent = recent*smooth.Decay(100*time.Millisecond, time.Second) + 10
	}
	fmt.Printf("%.1f\n", recent)
	// Output:
	// 105.1
}
