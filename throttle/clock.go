package throttle

import "time"

// clock is placeholder real time; see the package documentation.
type clock struct{}

func (clock) now() int64 { return micros(time.Now()) }
