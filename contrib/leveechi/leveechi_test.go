package leveechi_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/levee-dev/levee/contrib/leveechi"
	"github.com/levee-dev/levee/contrib/routetest"
)

// TestLearnsPerRoute: on loopback, levee learns a cheap and an expensive
// chi route's service times under their patterns.
func TestLearnsPerRoute(t *testing.T) {
	r := chi.NewRouter()
	r.Route("/api", func(r chi.Router) {
		r.Get("/cheap/{id}", routetest.Cheap)
		r.Get("/slow/{id}", routetest.Slow)
	})
	routetest.Check(t, r, leveechi.WithRoute(r), routetest.Routes{
		CheapPath: func(id int) string { return fmt.Sprintf("/api/cheap/%d", id) },
		SlowPath:  func(id int) string { return fmt.Sprintf("/api/slow/%d", id) },
		CheapName: "/api/cheap/{id}",
		SlowName:  "/api/slow/{id}",
	})
}

// TestRoute checks the names: mounted sub-routers, methods, misses.
func TestRoute(t *testing.T) {
	r := chi.NewRouter()
	r.Get("/items/{id}", routetest.Cheap)
	r.Post("/items", routetest.Cheap)
	sub := chi.NewRouter()
	sub.Get("/users/{name}/posts/{post}", routetest.Cheap)
	r.Mount("/v1", sub)
	route := leveechi.Route(r)
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/items/42", "/items/{id}"},
		{"POST", "/items", "/items"},
		{"GET", "/items", ""},
		{"GET", "/v1/users/ann/posts/7", "/v1/users/{name}/posts/{post}"},
		{"GET", "/nothing", ""},
		{"BREW", "/items/1", ""},
	} {
		if got := route(httptest.NewRequest(tt.method, tt.path, nil)); got != tt.want {
			t.Errorf("%s %s: route %q, want %q", tt.method, tt.path, got, tt.want)
		}
	}
}

func ExampleRoute() {
	r := chi.NewRouter()
	r.Get("/items/{id}", func(w http.ResponseWriter, r *http.Request) {})
	route := leveechi.Route(r)
	fmt.Println(route(httptest.NewRequest("GET", "/items/42", nil)))
	// Output: /items/{id}
}
