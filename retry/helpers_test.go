package retry

import (
	"time"

	"github.com/levee-dev/levee"
)

func errOverloaded(after time.Duration) error {
	return &levee.RejectedError{Reason: levee.Overloaded, RetryAfter: after}
}
