package soak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/report"
)

// Sample is one reading of a quantity of the backend, T seconds after the
// start of the load.
type Sample struct {
	T     float64 `json:"t_s"`
	Value float64 `json:"v"`
}

// Samples are the readings of the backend over a soak: resident memory
// (bytes), threads and open descriptors from /proc every period, live
// goroutines from its status JSON (once at rest before the load, at t 0,
// then each poll's answer when it came in time).
type Samples struct {
	RSS        []Sample `json:"rss_bytes"`
	Threads    []Sample `json:"threads"`
	FDs        []Sample `json:"fds"`
	Goroutines []Sample `json:"goroutines"`
	// StatusMisses counts the polls of the status page that failed.
	StatusMisses int `json:"status_misses"`
}

// procStatus reads VmRSS (bytes) and Threads from /proc/PID/status.
func procStatus(pid int) (rss int64, threads int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	return parseStatus(b)
}

// parseStatus reads VmRSS and Threads from the text of /proc/PID/status.
func parseStatus(b []byte) (rss int64, threads int, err error) {
	found := 0
	for _, line := range bytes.Split(b, []byte("\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		f := bytes.Fields(v)
		switch string(k) {
		case "VmRSS":
			if len(f) != 2 || string(f[1]) != "kB" {
				return 0, 0, fmt.Errorf("soak: malformed VmRSS %q", v)
			}
			kb, err := strconv.ParseInt(string(f[0]), 10, 64)
			if err != nil || kb < 0 {
				return 0, 0, fmt.Errorf("soak: malformed VmRSS %q", v)
			}
			rss = kb << 10
			found++
		case "Threads":
			n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
			if err != nil || n < 0 {
				return 0, 0, fmt.Errorf("soak: malformed Threads %q", v)
			}
			threads = n
			found++
		}
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("soak: no VmRSS or Threads in the process status")
	}
	return rss, threads, nil
}

// openFDs counts the entries of /proc/PID/fd.
func openFDs(pid int) (int, error) {
	d, err := os.Open("/proc/" + strconv.Itoa(pid) + "/fd")
	if err != nil {
		return 0, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	return len(names), err
}

// statusGoroutines reads the live goroutine count from a levee status
// page whose controller has the goroutines signal against ceiling.
func statusGoroutines(ctx context.Context, c *http.Client, url string, ceiling int) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("soak: status page answered %s", resp.Status)
	}
	v, err := load.StatusSignal(body, "goroutines")
	if err != nil {
		return 0, err
	}
	return int(math.Round(v * float64(ceiling))), nil
}

// Flatness says how flat one quantity stayed after the warm-up: every
// Window-long stretch's median against the median of all the judged
// samples. A leak is a trend, which window medians show; one sample's
// jitter (a burst of connections, a collection) is not.
type Flatness struct {
	Name string `json:"name"`
	// Samples judged (after the warm-up), and their median, min and max.
	Samples  int     `json:"samples"`
	Median   float64 `json:"median"`
	Min      float64 `json:"min"`
	Max      float64 `json:"max"`
	WindowS  float64 `json:"window_s"`
	Windows  int     `json:"windows"`
	LowestW  float64 `json:"lowest_window"`
	HighestW float64 `json:"highest_window"`
	// Deviation is the largest |window median − Median| ÷ Median.
	Deviation float64 `json:"deviation"`
	// GrowthPerMin is the least-squares slope over the judged samples, as
	// a share of Median per minute.
	GrowthPerMin float64 `json:"growth_per_min"`
}

// Flat judges the samples of one quantity taken after warmup seconds, in
// windows of window seconds.
func Flat(name string, samples []Sample, warmup, window float64) Flatness {
	f := Flatness{Name: name, WindowS: window}
	var xs, xt []float64
	for _, s := range samples {
		if s.T >= warmup {
			xs = append(xs, s.Value)
			xt = append(xt, s.T)
		}
	}
	f.Samples = len(xs)
	if len(xs) == 0 {
		return f
	}
	f.Median, f.Min, f.Max = report.Median(xs)
	if !(f.Median > 0) {
		return f
	}
	f.LowestW, f.HighestW = math.Inf(1), math.Inf(-1)
	for start := warmup; start < xt[len(xt)-1]+1e-9; start += window {
		var w []float64
		for i, t := range xt {
			if t >= start && t < start+window {
				w = append(w, xs[i])
			}
		}
		if len(w) == 0 {
			continue
		}
		m, _, _ := report.Median(w)
		f.Windows++
		f.LowestW, f.HighestW = min(f.LowestW, m), max(f.HighestW, m)
		f.Deviation = max(f.Deviation, math.Abs(m-f.Median)/f.Median)
	}
	if _, b, ok := report.FitLine(xt, xs); ok && len(xt) > 1 {
		f.GrowthPerMin = b * 60 / f.Median
	}
	return f
}

// sampler samples the backend every period until ctx is done: /proc on
// one goroutine, the status page on another, so that a status page slow
// to answer under overload delays no reading of /proc.
type sampler struct {
	pid       int
	statusURL string
	ceiling   int
	client    *http.Client
	start     time.Time
	period    time.Duration
}

func (s *sampler) run(ctx context.Context) Samples {
	var out Samples
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.every(ctx, func(t float64) bool {
			if g, err := s.goroutines(ctx, min(5*time.Second, 3*s.period)); err == nil {
				out.Goroutines = append(out.Goroutines, Sample{t, float64(g)})
			} else if ctx.Err() == nil {
				out.StatusMisses++
			}
			return true
		})
	}()
	var rss, threads, fds []Sample
	s.every(ctx, func(t float64) bool {
		r, th, err := procStatus(s.pid)
		if err != nil {
			return false // the process is gone
		}
		rss, threads = append(rss, Sample{t, float64(r)}), append(threads, Sample{t, float64(th)})
		if n, err := openFDs(s.pid); err == nil {
			fds = append(fds, Sample{t, float64(n)})
		}
		return true
	})
	<-done
	out.RSS, out.Threads, out.FDs = rss, threads, fds
	return out
}

// goroutines polls the status page once, within timeout, for the live
// goroutine count.
func (s *sampler) goroutines(ctx context.Context, timeout time.Duration) (int, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return statusGoroutines(pctx, s.client, s.statusURL, s.ceiling)
}

// atRest polls the idle backend's status page, within timeout, until its
// goroutines signal has a first measure (it reads 0 until then).
func (s *sampler) atRest(ctx context.Context, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		g, err := s.goroutines(ctx, timeout)
		if err == nil && g > 0 {
			return g, nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = errors.New("soak: the status page's goroutines signal read 0 until the timeout")
			}
			return 0, err
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// every calls f with the seconds since the start once a period until ctx
// is done or f returns false.
func (s *sampler) every(ctx context.Context, f func(t float64) bool) {
	every(ctx, s.period, func(now time.Time) bool { return f(now.Sub(s.start).Seconds()) })
}

// every calls f once a period until ctx is done or f returns false.
func every(ctx context.Context, period time.Duration, f func(now time.Time) bool) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			if !f(now) {
				return
			}
		}
	}
}
