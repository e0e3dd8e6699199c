package leveegin_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/levee-dev/levee/contrib/leveegin"
	"github.com/levee-dev/levee/contrib/routetest"
)

func init() { gin.SetMode(gin.ReleaseMode) }

// TestLearnsPerRoute: on loopback, levee learns a cheap and an expensive
// gin route's service times under their patterns.
func TestLearnsPerRoute(t *testing.T) {
	r := gin.New()
	api := r.Group("/api")
	api.GET("/cheap/:id", gin.WrapF(routetest.Cheap))
	api.GET("/slow/:id", gin.WrapF(routetest.Slow))
	routetest.Check(t, r, leveegin.WithRoute(r), routetest.Routes{
		CheapPath: func(id int) string { return fmt.Sprintf("/api/cheap/%d", id) },
		SlowPath:  func(id int) string { return fmt.Sprintf("/api/slow/%d", id) },
		CheapName: "/api/cheap/:id",
		SlowName:  "/api/slow/:id",
	})
}

// TestRoute checks the names against gin's own routing (FullPath) on the
// same table: static before parameter before catch-all, methods, misses.
func TestRoute(t *testing.T) {
	r := gin.New()
	var full string
	h := func(c *gin.Context) { full = c.FullPath() }
	for _, p := range []string{"/", "/items", "/items/:id", "/items/new", "/items/:id/parts/:part", "/static/*file", "/a/:x/c", "/a/b/d"} {
		r.GET(p, h)
	}
	r.POST("/items", h)
	route := leveegin.Route(r)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/items"}, {"GET", "/items/42"}, {"GET", "/items/new"},
		{"GET", "/items/42/parts/7"}, {"GET", "/static/"}, {"GET", "/static/css/a.css"},
		{"GET", "/static"}, {"GET", "/a/b/c"}, {"GET", "/a/b/d"}, {"GET", "/a/z/c"},
		{"POST", "/items"}, {"DELETE", "/items"}, {"GET", "/nothing"}, {"GET", "/items/42/"},
	} {
		full = ""
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))
		if got := route(httptest.NewRequest(tt.method, tt.path, nil)); got != full {
			t.Errorf("%s %s: route %q, gin's FullPath %q", tt.method, tt.path, got, full)
		}
	}
}

func ExampleRoute() {
	r := gin.New()
	r.GET("/items/:id", func(c *gin.Context) {})
	route := leveegin.Route(r)
	fmt.Println(route(httptest.NewRequest("GET", "/items/42", nil)))
	// Output: /items/:id
}
