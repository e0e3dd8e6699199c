package limits

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/overload"
)

// Server is a lab server child, started by Start.
type Server struct {
	// Addr is where it listens (loopback); Pid its process id.
	Addr string
	Pid  int

	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr lockedBuffer
	done   chan struct{}
	err    error
}

// lockedBuffer is a bytes.Buffer written by the child's stderr copier and
// read by the lab.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 4<<20 { // keep the first 4 MiB: enough to see a panic
		return len(p), nil
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Start re-executes this program as a lab server with cfg and the extra
// environment env (for example GOMEMLIMIT=256MiB), and waits until it
// listens. The child dies with this process (Pdeathsig), when Close is
// called, and after cfg.Limit.
func Start(ctx context.Context, cfg ServerConfig, env ...string) (*Server, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(append(os.Environ(), envRole+"=server"), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	s := &Server{cmd: cmd, done: make(chan struct{})}
	cmd.Stderr = &s.stderr
	if s.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.err = cmd.Wait()
		close(s.done)
	}()
	line, _ := json.Marshal(cfg)
	if _, err := s.stdin.Write(append(line, '\n')); err != nil {
		s.Close()
		return nil, err
	}
	readyc := make(chan error, 1)
	go func() {
		var r ready
		err := json.NewDecoder(bufio.NewReader(stdout)).Decode(&r)
		s.Addr, s.Pid = r.Addr, r.Pid
		readyc <- err
	}()
	select {
	case err = <-readyc:
	case <-s.done:
		err = fmt.Errorf("limits: the server exited before it listened: %v\n%s", s.err, s.stderr.String())
	case <-ctx.Done():
		err = ctx.Err()
	case <-time.After(30 * time.Second):
		err = errors.New("limits: the server did not listen within 30s")
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the child (its stdin closes; after 5 s it is killed) and
// returns how it exited: nil for a clean exit.
func (s *Server) Close() error {
	_ = s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	return s.err
}

// Alive reports whether the child is still running.
func (s *Server) Alive() bool {
	select {
	case <-s.done:
		return false
	default:
		return true
	}
}

// Stderr returns what the child wrote on its stderr (its log).
func (s *Server) Stderr() string { return s.stderr.String() }

// Panicked reports whether the child's stderr shows a Go panic or a
// fatal runtime error.
func (s *Server) Panicked() bool {
	e := s.Stderr()
	return strings.Contains(e, "panic:") || strings.Contains(e, "fatal error:")
}

// Stats fetches the child's /lab/stats.
func (s *Server) Stats(ctx context.Context) (Stats, error) {
	var st Stats
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.Addr+"/lab/stats", nil)
	if err != nil {
		return st, err
	}
	resp, err := statsClient.Do(req)
	if err != nil {
		return st, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return st, fmt.Errorf("limits: /lab/stats: %s", resp.Status)
	}
	return st, json.NewDecoder(resp.Body).Decode(&st)
}

// statsClient keeps one connection to the child, so that asking for
// stats needs no new descriptor on the child's side.
var statsClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}

// RSS returns the child's resident set size in bytes (VmRSS).
func (s *Server) RSS() (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(s.Pid) + "/status")
	if err != nil {
		return 0, err
	}
	return parseVmRSS(b)
}

// parseVmRSS reads the VmRSS line of a /proc/PID/status file.
func parseVmRSS(status []byte) (uint64, error) {
	for _, line := range strings.Split(string(status), "\n") {
		rest, ok := strings.CutPrefix(line, "VmRSS:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("limits: VmRSS line %q", line)
		}
		kb, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("limits: VmRSS line %q: %w", line, err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("limits: no VmRSS line")
}

// watch samples the child's RSS and probes its /healthz, each on a new
// connection (as a load balancer's health check), every period until ctx
// is done.
type watch struct {
	mu     sync.Mutex
	rss    []sample
	probes []sample // value 1 for an answer 200 within a second, 0 otherwise
}

type sample struct {
	t time.Time
	v float64
}

func startWatch(ctx context.Context, s *Server, period time.Duration) (*watch, func()) {
	w := &watch{}
	probe := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	stopRSS := every(ctx, period, func(now time.Time) {
		if rss, err := s.RSS(); err == nil {
			w.add(&w.rss, now, float64(rss))
		}
	})
	stopProbes := every(ctx, period, func(now time.Time) {
		ok := 0.0
		if resp, err := probe.Get("http://" + s.Addr + "/healthz"); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				ok = 1
			}
		}
		w.add(&w.probes, now, ok)
	})
	return w, func() { stopRSS(); stopProbes() }
}

// every calls f with the tick time every period, from a goroutine of its
// own, until the returned function is called (it waits for the last call
// to return) or ctx is done.
func every(ctx context.Context, period time.Duration, f func(now time.Time)) func() {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				f(now)
			}
		}
	}()
	return func() { cancel(); <-done }
}

func (w *watch) add(dst *[]sample, t time.Time, v float64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	*dst = append(*dst, sample{t, v})
}

// peak returns the highest sample in [from, to).
func peak(xs []sample, from, to time.Time) float64 {
	var p float64
	for _, x := range xs {
		if !x.t.Before(from) && x.t.Before(to) {
			p = max(p, x.v)
		}
	}
	return p
}

// count returns the samples in [from, to) and how many of them are 1.
func count(xs []sample, from, to time.Time) (n, ones int) {
	for _, x := range xs {
		if !x.t.Before(from) && x.t.Before(to) {
			n++
			if x.v == 1 {
				ones++
			}
		}
	}
	return n, ones
}

// holdConns keeps n connections to addr open until ctx is done, as a
// client that opens connections and sends nothing (or only part of a
// request head, with partial): each one the server closes is opened
// again. It returns how many the server closed.
func holdConns(ctx context.Context, addr string, n int, partial bool) int64 {
	var closed int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for ctx.Err() == nil {
				c, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", addr)
				if err != nil {
					select {
					case <-ctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
					continue
				}
				if partial {
					_, _ = io.WriteString(c, "GET /work HTTP/1.1\r\nHost: lab\r\n")
				}
				stop := context.AfterFunc(ctx, func() { c.Close() })
				_, _ = io.Copy(io.Discard, c) // until the server closes it
				if stop() {
					mu.Lock()
					closed++
					mu.Unlock()
				}
				c.Close()
			}
		})
	}
	wg.Wait()
	return closed
}

// trace fetches the child's stats every period into *dst until the
// returned function is called.
func trace(ctx context.Context, s *Server, period time.Duration, dst *[]Stats) func() {
	return every(ctx, period, func(time.Time) {
		if st, err := s.Stats(ctx); err == nil {
			*dst = append(*dst, st)
		}
	})
}

// TraceLine formats one trace entry: the in-flight count and cap, the
// level, each resource's reading, the gate's and admission's refusals.
func TraceLine(st Stats) string {
	var b strings.Builder
	fmt.Fprintf(&b, "served %d gor %d live %dMiB admit load %.2f rejected %d", st.Served, st.Goroutines, st.LiveHeap>>20, st.AdmitLoad, st.AdmitRejected)
	if st.AdmitRejected > 0 {
		fmt.Fprintf(&b, " (shed level %.2f, floor %.2f, by stage", st.AdmitShedLevel, st.AdmitFloor)
		for g := admit.StageTenant; int(g) < admit.NumStages; g++ {
			fmt.Fprintf(&b, " %s %d", g, st.AdmitShed[g])
		}
		b.WriteString(")")
	}
	for _, n := range slices.Sorted(maps.Keys(st.AdmitSignals)) {
		fmt.Fprintf(&b, " %s %.2f", n, st.AdmitSignals[n])
	}
	if c := st.Concurrency; c != nil {
		fmt.Fprintf(&b, " (in flight %.0f served %.0f allowed %.0f latency %v B %v T %v)",
			c.InFlight, c.Served, c.Allowed, c.Latency.Round(time.Millisecond), c.B.Round(time.Millisecond), c.T.Round(time.Millisecond))
	}
	if st.MaxLevel > 0 || st.Readings != nil {
		fmt.Fprintf(&b, " | level %v in flight %d cap %d refused %d", overload.Level(st.Level), st.InFlight, st.Cap, st.Refused)
		names := slices.Sorted(maps.Keys(st.Readings))
		for _, n := range names {
			fmt.Fprintf(&b, " %s %.3f", n, st.Readings[n])
		}
	}
	return b.String()
}
