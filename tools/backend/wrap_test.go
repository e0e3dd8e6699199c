package backend

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestNewExtra(t *testing.T) {
	reject := Wrap(func(app http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Levee-Reject", "overloaded")
			w.WriteHeader(http.StatusServiceUnavailable)
		})
	})
	srv, err := New(Options{Protection: "reject", Work: Work{Iterations: 10}, Start: time.Now(), Horizon: time.Minute,
		Extra: map[string]Wrap{"reject": reject}})
	if err != nil {
		t.Fatalf("New(reject) err = %v, want nil", err)
	}
	rec := httptest.NewRecorder()
	srv.Handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/work", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Errorf("status = %d, want %d", rec.Code, http.StatusServiceUnavailable)
	}
	var rejected, runs int64
	s := srv.Report().Series
	for i := range s.Rejected {
		rejected += s.Rejected[i]
		runs += s.Runs[i]
	}
	if rejected != 1 || runs != 0 {
		t.Errorf("rejected, runs = %d, %d, want 1, 0", rejected, runs)
	}
	if _, err := New(Options{Protection: "other", Extra: map[string]Wrap{"reject": reject}}); err == nil {
		t.Error("New(other) err = nil, want an error")
	}
}
