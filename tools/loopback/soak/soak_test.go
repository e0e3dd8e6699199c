package soak

import (
	"context"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
)

func TestParseStatus(t *testing.T) {
	ok := "Name:\tsoak.test\nState:\tS (sleeping)\nVmRSS:\t   20480 kB\nRssAnon:\t 1 kB\nThreads:\t7\n"
	rss, th, err := parseStatus([]byte(ok))
	if err != nil || rss != 20480<<10 || th != 7 {
		t.Errorf("parseStatus = %d, %d, %v; want %d, 7, nil", rss, th, err, 20480<<10)
	}
	for _, bad := range []string{"", "VmRSS:\t1 kB\n", "Threads:\t3\n", "VmRSS:\tx kB\nThreads:\t1\n", "VmRSS:\t1 MB\nThreads:\t1\n", "VmRSS:\t1 kB\nThreads:\t-1\n"} {
		if _, _, err := parseStatus([]byte(bad)); err == nil {
			t.Errorf("parseStatus(%q): err = nil", bad)
		}
	}
}

// samples returns n samples a second apart of f(t).
func samples(n int, f func(t float64) float64) []Sample {
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{T: float64(i), Value: f(float64(i))}
	}
	return out
}

func TestFlat(t *testing.T) {
	tests := []struct {
		name       string
		s          []Sample
		maxDev     float64
		minDev     float64
		wantGrowth float64 // share of the median per minute, ±0.02
	}{
		// ±15% jitter sample to sample, no trend: window medians stay close.
		{"jitter", samples(120, func(t float64) float64 { return 1000 * (1 + 0.15*math.Sin(t*2.1)) }), 0.05, 0, 0},
		// A warm-up that doubles the value is not judged.
		{"warm-up", samples(120, func(t float64) float64 { return 500 + 500*min(1, t/30) }), 0.001, 0, 0},
		// 0.5% growth a second: a leak, 30% per minute.
		{"leak", samples(120, func(t float64) float64 { return 1000 * (1 + 0.005*t) }), 1, 0.12, 0.23},
	}
	for _, tt := range tests {
		f := Flat(tt.name, tt.s, 30, 10)
		if f.Samples != 90 || f.Windows != 9 {
			t.Errorf("%s: %d samples in %d windows, want 90 in 9", tt.name, f.Samples, f.Windows)
		}
		if f.Deviation > tt.maxDev || f.Deviation < tt.minDev {
			t.Errorf("%s: deviation %.3f, want in [%.3f, %.3f]", tt.name, f.Deviation, tt.minDev, tt.maxDev)
		}
		if tt.name != "jitter" && math.Abs(f.GrowthPerMin-tt.wantGrowth) > 0.02 {
			t.Errorf("%s: growth %.3f a minute, want %.3f", tt.name, f.GrowthPerMin, tt.wantGrowth)
		}
	}
	if f := Flat("none", nil, 0, 10); f.Samples != 0 || f.Deviation != 0 {
		t.Errorf("Flat of nothing = %+v", f)
	}
}

func TestSources(t *testing.T) {
	s := NewSources(1)
	seen24, seen16 := map[string]bool{}, map[string]bool{}
	for range 4096 {
		ip := s.Next().To4()
		if ip[0] != 127 || ip[1] < 1 || ip[1] > 16 || ip[3] < 1 || ip[3] > 254 {
			t.Fatalf("source %v out of 127.1-16.*.1-254", ip)
		}
		seen24[ip.Mask(net.CIDRMask(24, 32)).String()] = true
		seen16[ip.Mask(net.CIDRMask(16, 32)).String()] = true
	}
	if len(seen24) != 4096 || len(seen16) != 16 {
		t.Errorf("4096 sources in %d /24s and %d /16s, want 4096 and 16", len(seen24), len(seen16))
	}
	if a, b := s.Next().To4(), NewSources(1).Next().To4(); a.Equal(b) || a[1] != b[1] || a[2] != b[2] {
		t.Errorf("the 4097th source %v, want the /24 of the first (%v) with another host", a, b)
	}
}

func TestRotation(t *testing.T) {
	t0 := time.Unix(1000, 0)
	r := &Rotation{Window: 100, Slide: 10, start: t0}
	ids := map[string]bool{}
	for range 1000 {
		ids[r.Next(t0)] = true
	}
	if len(ids) != 100 {
		t.Errorf("%d ids at one moment, want the window's 100", len(ids))
	}
	later := map[string]bool{}
	for range 1000 {
		later[r.Next(t0.Add(5*time.Second))] = true
	}
	shared := 0
	for id := range later {
		if ids[id] {
			shared++
		}
	}
	if len(later) != 100 || shared != 50 {
		t.Errorf("5 s later: %d ids, %d shared with before; want 100 and 50 (the window slid by 50)", len(later), shared)
	}
}

// inProcess serves a levee backend like the soak's (trusting 127.0.0.1,
// status page, goroutines signal) on loopback, its error log kept.
func inProcess(t *testing.T) (*backend.Server, string) {
	t.Helper()
	srv, err := backend.New(backend.Options{Protection: backend.Levee, Work: backend.Work{Iterations: 100},
		Start: time.Now(), Horizon: time.Minute,
		Levee: backend.LeveeOptions{Trust: []string{"127.0.0.1/32"}, Status: true, GoroutineCeiling: goroutineCeiling}})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	hs := &http.Server{ReadHeaderTimeout: time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	hs.ErrorLog = srv.ErrorLog()
	go srv.Run(ctx)
	go func() { _ = srv.Serve(ln, hs) }()
	t.Cleanup(func() { cancel(); hs.Close() })
	return srv, ln.Addr().String()
}

// TestHostileInProcess sends every hostile header set and every raw
// exchange that ends within seconds to a levee backend in this process:
// each gets an ordinary answer (served, or a levee rejection with its
// reason; a 4xx or 505 from net/http for what HTTP forbids), or a clean
// close, and nothing panics.
func TestHostileInProcess(t *testing.T) {
	srv, addr := inProcess(t)
	rot := &Rotation{Window: 10, Slide: 1, start: time.Now()}
	c, err := newClients("http://"+addr+"/work", rot, NewSources(1), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	for range 2 * len(HostileHeaders) {
		c.Do(context.Background(), &load.Call{Criticality: levee.Critical})
	}
	ans := c.Answers()
	for _, h := range HostileHeaders {
		got := ans[h.Name]
		var n int64
		for class, k := range got {
			n += k
			if class != "2xx" && !strings.HasPrefix(class, "503 ") && !strings.HasPrefix(class, "504 ") {
				t.Errorf("%s: answered %s, want 2xx or a levee rejection", h.Name, class)
			}
		}
		if n == 0 {
			t.Errorf("%s: no answer", h.Name)
		}
	}
	// An absurd timeout is refused for its deadline, never served late.
	for _, name := range []string{"timeout 0", "timeout negative"} {
		if ans[name]["504 deadline"] == 0 {
			t.Errorf("%s: answers %v, want 504 deadline", name, ans[name])
		}
	}

	d := &rawDriver{addr: addr, src: NewSources(17), outcomes: map[string]map[string]int64{}}
	var wg sync.WaitGroup
	for _, x := range RawExchanges {
		if x.Name == "slow head, a byte every 150 ms" || x.Name == "slow body" {
			continue // seconds each; the end-to-end soak sends them
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d.exchange(ctx, x)
		}()
	}
	wg.Wait()
	want := map[string]string{
		"bad request line":            "400",
		"bad version":                 "5xx",
		"control character in tenant": "400",
		"NUL in criticality":          "400",
		"bare CR in timeout":          "400",
		"space before colon":          "400",
		"head of 1.2 MB":              "431",
		"500 tenant headers":          "2xx",
		"HTTP/1.0 without host":       "2xx",
		"folded tenant":               "2xx",
		"pipelined":                   "2xx, then 5xx",
		"caller gone":                 "left",
		"slow head, G then 500 ms":    "2xx",
		"silent":                      "closed by the server",
	}
	for name, w := range want {
		if got := d.outcomes[name]; got[w] != 1 || len(got) != 1 {
			t.Errorf("%s: outcomes %v, want %s", name, got, w)
		}
	}
	if n := srv.Report().Panics; n != 0 {
		t.Errorf("%d handler panics", n)
	}
}

// TestSoakSmoke runs the soak end to end for a few seconds at a light
// rate: the processes, the traffic of every kind, the samplers and the
// report work, and the backend neither panics nor dies. Figures from a
// short run on a shared machine are noise: none is asserted.
func TestSoakSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a backend process for about 10 s")
	}
	res, err := Run(context.Background(), Config{Duration: 4 * time.Second, Rate: 200, After: 2 * time.Second,
		Warmup: time.Second, Window: time.Second, HostileEvery: 4, RawRate: 10, Slow: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + res.Text())
	for _, p := range res.Problems() {
		t.Error(p)
	}
	s := res.Samples
	if len(s.RSS) < 3 || len(s.FDs) < 3 {
		t.Errorf("%d RSS and %d descriptor samples, want ≥ 3 each", len(s.RSS), len(s.FDs))
	}
	// The goroutines at rest come first; the polls during the overload
	// may all miss on a busy machine (counted in StatusMisses).
	if len(s.Goroutines) == 0 || s.Goroutines[0].T != 0 || s.Goroutines[0].Value < 1 {
		t.Errorf("goroutine samples %v, want the backend's goroutines at rest first (t 0, ≥ 1)", s.Goroutines)
	}
	for _, x := range s.RSS {
		if x.Value < 1<<20 {
			t.Errorf("RSS %v bytes: not a process's", x.Value)
		}
	}
	if res.AttemptRPS <= 0 || len(res.Headers) == 0 || len(res.Raw) == 0 {
		t.Errorf("attempts %.0f/s, %d hostile header sets answered, %d raw kinds: want some of each", res.AttemptRPS, len(res.Headers), len(res.Raw))
	}
}
