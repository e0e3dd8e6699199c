package backend_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/levee-dev/levee/tools/backend"
)

// An unprotected backend burning about 50µs of CPU per request, with its
// counters.
func Example() {
	srv, err := backend.New(backend.Options{
		Protection: backend.None,
		Work:       backend.NewWork(50 * time.Microsecond),
		Start:      time.Now(),
		Horizon:    time.Minute,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	for i := 0; i < 3; i++ {
		srv.Handler.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/", nil))
	}
	var ok int64
	for _, n := range srv.Report().Series.OK {
		ok += n
	}
	fmt.Println("served:", ok)
	// Output: served: 3
}
