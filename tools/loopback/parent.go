package loopback

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
)

// Client kinds for Config.Client.
const (
	// Naive: per-attempt timeout, immediate retries on any failure, no
	// budget, no throttling (load.ClientNaive).
	Naive = load.ClientNaive
	// Levee: leveehttp.NewTransport with its defaults; Timeout is the
	// request's overall deadline (load.ClientLevee).
	Levee = load.ClientLevee
)

// Config describes one run: a fresh backend process and a fresh load
// generator process.
type Config struct {
	// Name labels the run in reports, e.g. "levee #2".
	Name string
	// Protection of the server: backend.None or backend.Levee.
	Protection string
	// Client kind: Naive or Levee.
	Client string
	// Work is the CPU time per request on the backend.
	Work time.Duration
	// Timeout is the client deadline: per attempt for Naive, overall for
	// Levee. Default 1s.
	Timeout time.Duration
	// Retries is the number of immediate retries of a Naive client.
	Retries int
	// Phases is the offered-load schedule.
	Phases []load.Phase
	// Drain is how long the generator waits for stragglers. Default 4s.
	Drain time.Duration
	// Progress, if set, receives the generator's progress once a second.
	Progress func(load.Progress)
	// Mix assigns criticalities and tenants to the arrivals (load.Mix);
	// the clients send them in levee's headers, which the backend
	// believes only from the networks Levee.Trust names.
	Mix load.Mix
	// Levee sets up the Levee protection beyond its defaults.
	Levee backend.LeveeOptions
	// TraceCPU, if above 0, reads the backend's CPU time from /proc every
	// TraceCPU for the run (Result.CPU).
	TraceCPU time.Duration
	// SnapshotTrace, if set, is a file the backend writes its
	// controller's snapshot to every 50 ms, one backend.TraceLine a line
	// (levee protection only; created, or truncated).
	SnapshotTrace string
}

// Result is one run's outcome, client and server side.
type Result struct {
	Config  Config         `json:"-"`
	Load    *load.Result   `json:"load"`
	Server  backend.Report `json:"server"`
	Backend Ready          `json:"backend"`
	// BackendStderr is what the backend wrote on its stderr (the first
	// 64 KiB): panics, race reports, net/http's complaints (a few of each
	// kind, see backend.ErrorLog).
	BackendStderr string `json:"backend_stderr,omitempty"`
	// CPU is the backend's CPU trace when Config.TraceCPU asked for one.
	CPU *CPUTrace `json:"-"`
}

// Placement says which CPUs the children are pinned to; -1 is unpinned.
type Placement struct {
	Backend, Loadgen int
}

// Place returns the CPUs the harness pins its children to: the first
// CPU this process was allowed when it started for the backend and the
// second for the generator. With a single allowed CPU the generator is
// left unpinned. The CPUs are read once, at start: a process that pinned
// itself to the generator's CPU (PinSelf) and then starts another backend
// must not place it beside itself.
func Place() Placement { return startPlace }

var startPlace = place()

func place() Placement {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return Placement{-1, -1}
	}
	var cpus []int
	for i := 0; i < 1024 && len(cpus) < 2; i++ {
		if set.IsSet(i) {
			cpus = append(cpus, i)
		}
	}
	switch len(cpus) {
	case 0:
		return Placement{-1, -1}
	case 1:
		return Placement{cpus[0], -1}
	}
	return Placement{cpus[0], cpus[1]}
}

type child struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	msgs   chan message
	stderr *capBuffer
	waited chan error
}

// capBuffer keeps the first 64 KiB written to it.
type capBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (c *capBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := 64<<10 - c.b.Len(); room > 0 {
		c.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.b.String()
}

// startChild re-executes the current binary as role, pinned to cpu (-1:
// unpinned), and sends it cfg as its first stdin line. The child is killed
// when ctx is done, when this process dies (Pdeathsig) and when its stdin
// closes.
func startChild(ctx context.Context, role string, cpu int, gomaxprocs int, cfg any) (*child, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), envRole+"="+role, "GOMAXPROCS="+strconv.Itoa(gomaxprocs))
	if cpu >= 0 {
		cmd.Env = append(cmd.Env, envCPU+"="+strconv.Itoa(cpu))
	}
	if role == roleLoadgen {
		// The generator allocates per request; fewer collections leave its
		// one CPU to the arrival process.
		cmd.Env = append(cmd.Env, "GOGC=400")
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	c := &child{cmd: cmd, msgs: make(chan message, 64), stderr: &capBuffer{}, waited: make(chan error, 1)}
	cmd.Stderr = c.stderr
	c.in, err = cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			var m message
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				c.msgs <- m
			}
		}
		close(c.msgs)
		c.waited <- cmd.Wait()
	}()
	b, _ := json.Marshal(cfg)
	if _, err := c.in.Write(append(b, '\n')); err != nil {
		c.kill()
		return nil, err
	}
	return c, nil
}

func (c *child) kill() {
	_ = c.in.Close()
	if c.cmd.Process != nil {
		_ = c.cmd.Process.Kill()
	}
}

// next returns the next message of one of kinds, handing progress
// messages to onProgress; it fails on an error message or the child's end.
func (c *child) next(onProgress func(load.Progress), kinds ...string) (message, error) {
	for m := range c.msgs {
		switch m.Kind {
		case "progress":
			if onProgress != nil {
				var p load.Progress
				if json.Unmarshal(m.Data, &p) == nil {
					onProgress(p)
				}
			}
			continue
		case "error":
			var s string
			_ = json.Unmarshal(m.Data, &s)
			return m, fmt.Errorf("loopback: %s child: %s", c.role(), s)
		}
		for _, k := range kinds {
			if m.Kind == k {
				return m, nil
			}
		}
	}
	err := <-c.waited
	c.waited <- err
	return message{}, fmt.Errorf("loopback: %s child ended early (%v): %s", c.role(), err, c.stderr.String())
}

func (c *child) role() string {
	for _, e := range c.cmd.Env {
		if len(e) > len(envRole)+1 && e[:len(envRole)+1] == envRole+"=" {
			return e[len(envRole)+1:]
		}
	}
	return "?"
}

func scheduleLength(ph []load.Phase) time.Duration {
	var d time.Duration
	for _, p := range ph {
		d += p.Duration
	}
	return d
}

// Run runs one configuration: it starts a backend child with the requested
// protection, then a load generator child that drives the phases against
// it, and returns both sides' reports. Both children are gone when Run
// returns.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 4 * time.Second
	}
	pl := Place()
	// Generous: a saturated GOMAXPROCS=1 backend answers "stop" only once
	// its timer goroutine gets the CPU again, which can take tens of seconds
	// behind a run queue of CPU-bound handlers.
	limit := 2*(scheduleLength(cfg.Phases)+cfg.Drain) + 60*time.Second
	be, ready, err := startBackend(ctx, pl.Backend, backendConfig{Protection: cfg.Protection, Work: cfg.Work, Levee: cfg.Levee, Limit: limit, Trace: cfg.SnapshotTrace})
	if err != nil {
		return nil, err
	}
	defer be.kill()
	res := &Result{Config: cfg, Backend: ready}
	if cfg.TraceCPU > 0 {
		tctx, stop := context.WithCancel(ctx)
		var traced <-chan struct{}
		res.CPU, traced = TraceCPU(tctx, be.cmd.Process.Pid, cfg.TraceCPU)
		defer func() { stop(); <-traced }()
	}
	lg, err := startChild(ctx, roleLoadgen, pl.Loadgen, 1, loadConfig{
		URL:     "http://" + ready.Addr + "/work",
		Client:  cfg.Client,
		Timeout: cfg.Timeout,
		Retries: cfg.Retries,
		Phases:  cfg.Phases,
		Mix:     cfg.Mix,
		Drain:   cfg.Drain,
		Limit:   limit,
	})
	if err != nil {
		return nil, err
	}
	defer lg.kill()
	m, err := lg.next(cfg.Progress, "report")
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(m.Data, &res.Load); err != nil {
		return nil, fmt.Errorf("loopback: generator report: %w", err)
	}
	b := &Backend{c: be}
	res.Server, err = b.Stop()
	res.BackendStderr = b.Stderr()
	if err != nil {
		return nil, err
	}
	return res, nil
}

func startBackend(ctx context.Context, cpu int, cfg backendConfig) (*child, Ready, error) {
	var ready Ready
	if cfg.Iterations <= 0 {
		cfg.Iterations = Calibrated(cfg.Work)
	}
	be, err := startChild(ctx, roleBackend, cpu, 1, cfg)
	if err != nil {
		return nil, ready, err
	}
	m, err := be.next(nil, "ready")
	if err != nil {
		be.kill()
		return nil, ready, err
	}
	if err := json.Unmarshal(m.Data, &ready); err != nil {
		be.kill()
		return nil, ready, err
	}
	KeepCalibrated(ready.Work)
	return be, ready, nil
}

// Calibrated returns the Spin count this process's first backend for cost
// calibrated (see calibration), or 0 before one has: a harness that starts
// backends of its own (the gRPC lab) passes it on so that its backends and
// this package's run the same work.
func Calibrated(cost time.Duration) int { return calibration.get(cost) }

// KeepCalibrated records the work a backend calibrated, unless one is
// kept for its cost already.
func KeepCalibrated(w backend.Work) { calibration.keep(w) }

// calibration is the work each backend of this process runs, by its
// cost: the first backend started for a cost calibrates it on the
// backends' CPU and every later one runs the same Spin count. Each child
// calibrating its own, the work of two backends in one run differed with
// what else ran on the CPU at their start (a capacity measured with one
// and a goodput with another then compare different work).
var calibration = calibrations{byCost: map[time.Duration]int{}}

type calibrations struct {
	mu     sync.Mutex
	byCost map[time.Duration]int
}

// get returns the Spin count kept for cost, or 0 if none is.
func (c *calibrations) get(cost time.Duration) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byCost[cost]
}

// keep records w's Spin count for its cost unless one is kept already.
func (c *calibrations) keep(w backend.Work) {
	if w.Iterations <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byCost[w.Cost]; !ok {
		c.byCost[w.Cost] = w.Iterations
	}
}

// Backend is a backend child serving on loopback, pinned to the first
// allowed CPU with GOMAXPROCS=1, until Stop.
type Backend struct {
	Ready
	// PID is the child's process id, for its CPU time.
	PID int
	c   *child
}

// StartBackend starts a backend child with the given protection
// (backend.None or backend.Levee) and CPU work per request. It lives
// until Stop, until ctx is done, or for limit at most.
func StartBackend(ctx context.Context, protection string, work, limit time.Duration) (*Backend, error) {
	return StartBackendWith(ctx, BackendConfig{Protection: protection, Work: work, Limit: limit})
}

// BackendConfig describes a backend child started alone.
type BackendConfig struct {
	// Protection is backend.None, backend.Levee or a name registered
	// with HijackWith; Work the CPU time per request.
	Protection string
	Work       time.Duration
	// Levee sets up the Levee protection beyond its defaults.
	Levee backend.LeveeOptions
	// Limit is the child's longest life.
	Limit time.Duration
}

// StartBackendWith is StartBackend with the Levee protection's options.
func StartBackendWith(ctx context.Context, cfg BackendConfig) (*Backend, error) {
	c, ready, err := startBackend(ctx, Place().Backend, backendConfig{Protection: cfg.Protection, Work: cfg.Work, Levee: cfg.Levee, Limit: cfg.Limit})
	if err != nil {
		return nil, err
	}
	return &Backend{Ready: ready, PID: c.cmd.Process.Pid, c: c}, nil
}

// Stderr returns what the backend wrote on its stderr so far (the first
// 64 KiB).
func (b *Backend) Stderr() string { return b.c.stderr.String() }

// Alive says whether the backend process is still running.
func (b *Backend) Alive() bool {
	select {
	case err := <-b.c.waited:
		b.c.waited <- err
		return false
	default:
		return true
	}
}

// Stop stops the backend and returns its report; the child is gone
// when Stop returns.
func (b *Backend) Stop() (backend.Report, error) {
	defer b.c.kill()
	var r backend.Report
	if _, err := b.c.in.Write([]byte("stop\n")); err != nil {
		return r, fmt.Errorf("loopback: stop backend: %w", err)
	}
	m, err := b.c.next(nil, "report")
	if err != nil {
		return r, err
	}
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return r, fmt.Errorf("loopback: backend report: %w", err)
	}
	return r, nil
}

// Capacity measures the peak throughput of an unprotected backend doing
// work per request: a closed loop of workers keep-alive connections for
// d after a short warm-up, from the generator CPU.
func Capacity(ctx context.Context, work time.Duration, workers int, d time.Duration) (float64, Ready, error) {
	pl := Place()
	limit := d + 30*time.Second
	be, ready, err := startBackend(ctx, pl.Backend, backendConfig{Protection: backend.None, Work: work, Limit: limit})
	if err != nil {
		return 0, ready, err
	}
	defer be.kill()
	warm := min(d/2, time.Second)
	lg, err := startChild(ctx, roleLoadgen, pl.Loadgen, 1, loadConfig{
		URL:     "http://" + ready.Addr + "/work",
		Client:  Naive,
		Timeout: 5 * time.Second,
		Workers: workers,
		Warm:    warm,
		Measure: d,
		Limit:   limit,
	})
	if err != nil {
		return 0, ready, err
	}
	defer lg.kill()
	m, err := lg.next(nil, "capacity")
	if err != nil {
		return 0, ready, err
	}
	var rate float64
	if err := json.Unmarshal(m.Data, &rate); err != nil {
		return 0, ready, err
	}
	if rate <= 0 {
		return 0, ready, errors.New("loopback: capacity measured as 0")
	}
	return rate, ready, nil
}
