package loadgen

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/tools/report"
)

func resp(code int, reject string) *http.Response {
	r := &http.Response{StatusCode: code, Header: http.Header{}}
	if reject != "" {
		r.Header.Set("Levee-Reject", reject)
	}
	return r
}

func TestClassify(t *testing.T) {
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want Outcome
	}{
		{"200", resp(200, ""), nil, Goodput},
		{"204", resp(204, ""), nil, Goodput},
		{"503 levee", resp(503, "overloaded"), nil, Rejected},
		{"429 levee", resp(429, "quota"), nil, Rejected},
		{"504 levee", resp(504, "deadline"), nil, Rejected},
		{"503 plain", resp(503, ""), nil, Failed},
		{"500 with header", resp(500, "overloaded"), nil, Failed},
		{"404", resp(404, ""), nil, Failed},
		{"throttled error", nil, fmt.Errorf("get: %w", levee.ErrThrottled), Throttled},
		{"overloaded error", nil, fmt.Errorf("get: %w", levee.ErrOverloaded), Rejected},
		{"deadline rejection", nil, levee.ErrDeadline, Rejected},
		{"timeout", nil, context.DeadlineExceeded, Failed},
		{"reset", nil, syscall.ECONNRESET, Failed},
		{"no fd", nil, fmt.Errorf("dial: %w", syscall.EMFILE), GenError},
		{"no port", nil, fmt.Errorf("dial: %w", syscall.EADDRNOTAVAIL), GenError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(tt.resp, tt.err); got != tt.want {
				t.Errorf("Classify = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	tests := []struct {
		o    Outcome
		want string
	}{
		{Goodput, "goodput"}, {Rejected, "rejected"}, {Throttled, "throttled"},
		{Failed, "failed"}, {GenError, "generator_error"}, {Outcome(42), "Outcome(42)"},
	}
	for _, tt := range tests {
		if got := tt.o.String(); got != tt.want {
			t.Errorf("Outcome(%d).String() = %q, want %q", tt.o, got, tt.want)
		}
	}
}

func TestRunBadConfig(t *testing.T) {
	ok := func(context.Context, *Call) Outcome { return Goodput }
	tests := []struct {
		name string
		cfg  Config
		want error
	}{
		{"no phases", Config{Do: ok}, ErrNoPhases},
		{"no func", Config{Phases: []Phase{{Name: "a", Rate: 1, Duration: time.Second}}}, ErrNoFunc},
	}
	for _, tt := range tests {
		if _, err := Run(context.Background(), tt.cfg); !errors.Is(err, tt.want) {
			t.Errorf("%s: err = %v, want %v", tt.name, err, tt.want)
		}
	}
	if _, err := Run(context.Background(), Config{Do: ok, Phases: []Phase{{Name: "neg", Rate: -1, Duration: time.Second}}}); err == nil {
		t.Error("negative rate: err = nil, want an error")
	}
}

// TestRunCounts checks that every arrival ends in exactly one outcome and
// that outcomes land in the phase they were offered in.
func TestRunCounts(t *testing.T) {
	outcomes := []Outcome{Goodput, Rejected, Throttled, Failed}
	rep, err := Run(context.Background(), Config{
		Phases: []Phase{
			{Name: "a", Rate: 200, Duration: 100 * time.Millisecond},
			{Name: "idle", Rate: 0, Duration: 20 * time.Millisecond},
			{Name: "b", Rate: 400, Duration: 100 * time.Millisecond},
		},
		Do: func(ctx context.Context, c *Call) Outcome {
			c.Attempt()
			c.Attempt()
			return outcomes[c.Phase%len(outcomes)]
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []PhaseStats{
		{Name: "a", Tally: report.Tally{Offered: 20, Attempted: 40, Goodput: 20}},
		{Name: "idle"},
		{Name: "b", Tally: report.Tally{Offered: 40, Attempted: 80, Throttled: 40}},
	}
	for i, w := range want {
		g := rep.Phases[i]
		if g.Name != w.Name || g.Offered != w.Offered || g.Attempted != w.Attempted || g.Goodput != w.Goodput || g.Throttled != w.Throttled || g.Failed != 0 || g.Rejected != 0 {
			t.Errorf("phase %d = %+v, want %+v", i, g, w)
		}
	}
	var offered, served int64
	for _, b := range rep.Series {
		offered += b.Offered
		served += b.Served
	}
	if offered != 60 || served != 20 {
		t.Errorf("series: offered %d served %d, want 60 and 20", offered, served)
	}
	if rep.Phases[0].P50 <= 0 || rep.Phases[0].P99 < rep.Phases[0].P50 {
		t.Errorf("phase a latency p50 %v p99 %v, want 0 < p50 ≤ p99", rep.Phases[0].P50, rep.Phases[0].P99)
	}
}

func TestMaxInFlight(t *testing.T) {
	release := make(chan struct{})
	rep, err := Run(context.Background(), Config{
		Phases:      []Phase{{Name: "a", Rate: 100, Duration: 100 * time.Millisecond}},
		MaxInFlight: 3,
		Do: func(ctx context.Context, c *Call) Outcome {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return Goodput
		},
		Drain: time.Millisecond,
	})
	close(release)
	if err != nil {
		t.Fatal(err)
	}
	p := rep.Phases[0]
	if p.Offered != 10 || p.GenErrors != 7 || p.Goodput != 3 || rep.GenErrors != 7 || rep.Cancelled != 3 {
		t.Errorf("got offered %d generator errors %d (run %d) goodput %d cancelled %d, want 10, 7 (7), 3, 3",
			p.Offered, p.GenErrors, rep.GenErrors, p.Goodput, rep.Cancelled)
	}
}

func TestCallNil(t *testing.T) {
	var c *Call
	c.Attempt() // must not panic
	if got := CallFrom(context.Background()); got != nil {
		t.Errorf("CallFrom(empty) = %v, want nil", got)
	}
}

func TestClosedBestSecond(t *testing.T) {
	// One worker and a service taking 10ms a request: at most 100 in any
	// second, and Closed returns once d is over.
	got := Closed(context.Background(), 1, 0, 1500*time.Millisecond, func(ctx context.Context) Outcome {
		select {
		case <-ctx.Done():
			return Failed
		case <-time.After(10 * time.Millisecond):
		}
		return Goodput
	})
	if got <= 0 || got > 100 {
		t.Errorf("Closed = %v req/s, want in (0, 100] (one worker, 10ms per request)", got)
	}
}
