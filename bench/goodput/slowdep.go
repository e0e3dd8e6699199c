package goodput

import (
	"net/http"

	"github.com/failsafe-go/failsafe-go/adaptivelimiter"
	"github.com/failsafe-go/failsafe-go/failsafehttp"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loopback/slowdep"
)

// FailsafeDep is failsafe-go's adaptive limiter, with its defaults, in
// front of the slow-dependency service (package slowdep).
const FailsafeDep = "dep-failsafe"

// SlowDepWraps returns the slow-dependency lab's protections: levee's and
// the unprotected service (slowdep.Wraps), failsafe-go's adaptive limiter
// and aegis BBR.
func SlowDepWraps() map[string]backend.Wrap {
	w := slowdep.Wraps()
	w[FailsafeDep] = backend.SlowDependencyWrap(func(h http.Handler) http.Handler {
		return marked(failsafehttp.NewHandler(h, adaptivelimiter.NewWithDefaults[*http.Response]()))
	})
	w[BBRDep] = bbrDepWrap()
	return w
}
