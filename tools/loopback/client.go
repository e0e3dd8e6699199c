package loopback

import (
	"net/http"

	"github.com/levee-dev/levee/leveehttp"
)

// leveeTransport is the levee client stack over next: leveehttp's
// Transport with its defaults (adaptive throttling per host, budgeted
// jittered retries, deadline propagation).
func leveeTransport(next http.RoundTripper) http.RoundTripper {
	return leveehttp.NewTransport(next)
}
