package wire_test

import (
	"fmt"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/internal/wire"
)

func Example() {
	// The minimum of every valid timeout header wins; malformed ones are ignored.
	d, ok := wire.ParseTimeout([]string{"800", "abc"}, []string{"500m"}, nil)
	fmt.Println(d, ok)

	// Repeating the criticality header can only lower it.
	c, _ := wire.ParseCriticality([]string{"CRITICAL_PLUS", "1"})
	fmt.Println(c)

	fmt.Println(wire.FormatReject(levee.Overloaded, true))
	fmt.Println(wire.FormatRetryAfter(1200*time.Millisecond), wire.FormatRetryAfterMs(1200*time.Millisecond))
	fmt.Println(wire.PeerTenant("192.0.2.77:5000"))
	// Output:
	// 500ms true
	// SHEDDABLE
	// overloaded; no-retry
	// 2 1200
	// 192.0.2.0/24
}
