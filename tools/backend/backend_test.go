package backend

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/levee-dev/levee/internal/nettest"
	"github.com/levee-dev/levee/tools/load"
)

func TestSpinDeterministic(t *testing.T) {
	if a, b := Spin(1000, 7), Spin(1000, 7); a != b {
		t.Errorf("Spin(1000, 7) = %d then %d, want equal", a, b)
	}
	if a, b := Spin(1000, 7), Spin(1001, 7); a == b {
		t.Errorf("Spin(1000, 7) == Spin(1001, 7) = %d, want different", a)
	}
}

func TestCalibratePositive(t *testing.T) {
	if got := Calibrate(); got <= 0 {
		t.Errorf("Calibrate() = %v, want > 0", got)
	}
}

func TestStatsCount(t *testing.T) {
	start := time.Now().Add(-time.Second)
	s := NewStats(start, 100*time.Millisecond, time.Minute)
	app := Handler(Work{Iterations: 10}, s)
	reject := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Levee-Reject", "overloaded")
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	past := strconv.FormatInt(time.Now().Add(-time.Second).UnixNano(), 10)
	future := strconv.FormatInt(time.Now().Add(time.Hour).UnixNano(), 10)
	tests := []struct {
		h        http.Handler
		deadline string
	}{
		{s.Count(app), ""}, {s.Count(app), future}, {s.Count(app), past},
		{s.Count(reject), ""}, {s.Count(plain), ""},
	}
	for _, tt := range tests {
		r := httptest.NewRequest(http.MethodGet, "/work", nil)
		if tt.deadline != "" {
			r.Header.Set(load.DeadlineHeader, tt.deadline)
		}
		tt.h.ServeHTTP(httptest.NewRecorder(), r)
	}
	got := s.Snapshot()
	sum := func(xs []int64) (n int64) {
		for _, x := range xs {
			n += x
		}
		return n
	}
	for _, c := range []struct {
		name string
		got  int64
		want int64
	}{
		{"runs", sum(got.Runs), 3}, {"late", sum(got.Late), 1}, {"ok", sum(got.OK), 3},
		{"ok late", sum(got.OKLate), 1}, {"rejected", sum(got.Rejected), 1}, {"other", sum(got.Other), 1},
	} {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
}

func TestDominant(t *testing.T) {
	tests := []struct {
		in    map[string]float64
		name  string
		share float64
	}{
		{nil, "", 0},
		{map[string]float64{"cpu": 3, "queue_delay": 1}, "cpu", 0.75},
		{map[string]float64{"b": 1, "a": 1}, "a", 0.5},
	}
	for _, tt := range tests {
		n, s := Dominant(tt.in)
		if n != tt.name || s != tt.share {
			t.Errorf("Dominant(%v) = %q, %v, want %q, %v", tt.in, n, s, tt.name, tt.share)
		}
	}
}

func TestNewUnknownProtection(t *testing.T) {
	if _, err := New(Options{Protection: "magic"}); err == nil {
		t.Error("New(magic) err = nil, want an error")
	}
}

// TestReportConnsGone: a levee backend reports the connections its
// listener closed unread, their peer gone before the accept.
func TestReportConnsGone(t *testing.T) {
	srv, err := New(Options{Protection: Levee, Work: NewWork(time.Microsecond), Start: time.Now(), Horizon: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nettest.QueueGone(t, ln.Addr().String(), "")
	hs := &http.Server{}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln, hs) }()
	defer func() {
		hs.Close()
		<-served
	}()
	resp, err := http.Get("http://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := srv.Report().ConnsGone; got != 1 {
		t.Errorf("ConnsGone %d after one connection closed before its accept, want 1", got)
	}
}

// TestWorkFor: a count passed by the parent is used as it is; without
// one the work is calibrated here.
func TestWorkFor(t *testing.T) {
	if w := WorkFor(time.Millisecond, 4321); w.Iterations != 4321 || w.Cost != time.Millisecond {
		t.Errorf("WorkFor(1ms, 4321) = %+v, want 4321 iterations of 1ms", w)
	}
	if w := WorkFor(time.Millisecond, 0); w.Iterations <= 0 {
		t.Errorf("WorkFor(1ms, 0) = %+v, want a calibrated positive count", w)
	}
}
