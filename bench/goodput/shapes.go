package goodput

import (
	"net/http"

	"github.com/go-kratos/aegis/ratelimit/bbr"

	"github.com/levee-dev/levee/tools/backend"
)

// BBRDep is aegis BBR, with its defaults, in front of the slow-dependency
// service (package slowdep).
const BBRDep = "dep-bbr"

// bbrDepWrap is BBRDep's Wrap.
func bbrDepWrap() backend.Wrap {
	return backend.SlowDependencyWrap(func(h http.Handler) http.Handler { return bbrHandler(h, bbr.NewLimiter()) })
}
