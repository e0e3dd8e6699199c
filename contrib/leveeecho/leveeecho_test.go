package leveeecho_test

import (
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/levee-dev/levee/contrib/leveeecho"
	"github.com/levee-dev/levee/contrib/routetest"
)

// TestLearnsPerRoute: on loopback, levee learns a cheap and an expensive
// echo route's service times under their patterns.
func TestLearnsPerRoute(t *testing.T) {
	e := echo.New()
	api := e.Group("/api")
	api.GET("/cheap/:id", echo.WrapHandler(httpFunc(routetest.Cheap)))
	api.GET("/slow/:id", echo.WrapHandler(httpFunc(routetest.Slow)))
	routetest.Check(t, e, leveeecho.WithRoute(e), routetest.Routes{
		CheapPath: func(id int) string { return fmt.Sprintf("/api/cheap/%d", id) },
		SlowPath:  func(id int) string { return fmt.Sprintf("/api/slow/%d", id) },
		CheapName: "/api/cheap/:id",
		SlowName:  "/api/slow/:id",
	})
}

// TestRoute checks the names against echo's own routing (c.Path()) on the
// same table, misses and other methods included.
func TestRoute(t *testing.T) {
	e := echo.New()
	var path string
	h := func(c echo.Context) error { path = c.Path(); return nil }
	for _, p := range []string{"/", "/items", "/items/:id", "/items/new", "/items/:id/parts/:part", "/static/*", "/a/:x/c", "/a/b/d"} {
		e.GET(p, h)
	}
	e.POST("/items", h)
	route := leveeecho.Route(e)
	for _, tt := range []struct{ method, path string }{
		{"GET", "/"}, {"GET", "/items"}, {"GET", "/items/42"}, {"GET", "/items/new"},
		{"GET", "/items/42/parts/7"}, {"GET", "/static/css/a.css"}, {"GET", "/a/b/c"},
		{"GET", "/a/b/d"}, {"GET", "/a/z/c"}, {"POST", "/items"}, {"DELETE", "/items"},
		{"GET", "/nothing/here"},
	} {
		path = ""
		e.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(tt.method, tt.path, nil))
		if got := route(httptest.NewRequest(tt.method, tt.path, nil)); got != path {
			t.Errorf("%s %s: route %q, echo's c.Path() %q", tt.method, tt.path, got, path)
		}
	}
}

func ExampleRoute() {
	e := echo.New()
	e.GET("/items/:id", func(c echo.Context) error { return nil })
	route := leveeecho.Route(e)
	fmt.Println(route(httptest.NewRequest("GET", "/items/42", nil)))
	// Output: /items/:id
}
