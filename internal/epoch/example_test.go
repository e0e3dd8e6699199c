package epoch_test

import (
	"fmt"
	"time"

	"github.com/levee-dev/levee/internal/epoch"
)

func Example() {
	// 100 ms buckets on both sides of 1970: rounding down keeps them apart.
	for _, t := range []time.Time{time.Unix(0, -1e3), time.Unix(0, 0), time.Unix(0, 150e6)} {
		us := epoch.Micros(t)
		fmt.Println(us, epoch.Bucket(us, 100_000))
	}
	// Output:
	// -1 -1
	// 0 0
	// 150000 1
}
