package loopback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
)

// Environment of a re-executed child.
const (
	envRole = "LEVEE_LOOPBACK_ROLE" // "backend" or "loadgen"
	envCPU  = "LEVEE_LOOPBACK_CPU"  // CPU to pin every thread to; unset = unpinned
)

const (
	roleBackend = "backend"
	roleLoadgen = "loadgen"
)

// Hijack runs a child role and exits the process if this process was
// started by the harness as one; otherwise it returns false at once. Call
// it first thing in main (and in TestMain of tests that use the harness),
// before flags are parsed.
func Hijack() bool {
	role := os.Getenv(envRole)
	if role == "" {
		return false
	}
	os.Exit(runChild(role))
	return true
}

// message is one line a child writes on its stdout.
type message struct {
	Kind string          `json:"kind"` // ready, progress, report, error
	Data json.RawMessage `json:"data,omitempty"`
}

type childOut struct {
	mu  sync.Mutex
	enc *json.Encoder
}

func (o *childOut) send(kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b, _ = json.Marshal(err.Error())
		kind = "error"
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	_ = o.enc.Encode(message{Kind: kind, Data: b})
}

// backendConfig is the first line a backend child reads on stdin.
type backendConfig struct {
	Protection string        `json:"protection"`
	Work       time.Duration `json:"work"`
	// Iterations, when above 0, is the work's Spin count as calibrated
	// by an earlier backend of the same parent (calibration): the child
	// then does not calibrate its own.
	Iterations int                  `json:"iterations,omitempty"`
	Levee      backend.LeveeOptions `json:"levee"`
	Limit      time.Duration        `json:"limit"`           // hard limit on the child's life
	Trace      string               `json:"trace,omitempty"` // Config.SnapshotTrace
}

// Ready is what a backend child says once it serves: its address, its
// calibrated work, its GOMAXPROCS and the CPU it is pinned to.
type Ready struct {
	Addr       string       `json:"addr"`
	Work       backend.Work `json:"work"`
	GOMAXPROCS int          `json:"gomaxprocs"`
	Pinned     string       `json:"pinned"`
}

// loadConfig is the first line a load generator child reads on stdin.
type loadConfig struct {
	URL     string        `json:"url"`
	Client  string        `json:"client"` // naive or levee
	Timeout time.Duration `json:"timeout"`
	Retries int           `json:"retries"`
	Phases  []load.Phase  `json:"phases,omitempty"`
	Mix     load.Mix      `json:"mix"`
	Drain   time.Duration `json:"drain"`
	// Closed, if Workers > 0, measures the closed-loop peak instead.
	Workers int           `json:"workers,omitempty"`
	Warm    time.Duration `json:"warm,omitempty"`
	Measure time.Duration `json:"measure,omitempty"`
	Limit   time.Duration `json:"limit"`
}

func runChild(role string) int {
	pinned, err := pinFromEnv()
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopback:", err)
	}
	out := &childOut{enc: json.NewEncoder(os.Stdout)}
	line, err := readLine(0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "loopback: no config:", err)
		return 2
	}
	switch role {
	case roleBackend:
		var cfg backendConfig
		if err := json.Unmarshal(line, &cfg); err != nil {
			fmt.Fprintln(os.Stderr, "loopback: bad config:", err)
			return 2
		}
		hardLimit(cfg.Limit)
		return runBackend(cfg, pinned, out)
	case roleLoadgen:
		var cfg loadConfig
		if err := json.Unmarshal(line, &cfg); err != nil {
			fmt.Fprintln(os.Stderr, "loopback: bad config:", err)
			return 2
		}
		hardLimit(cfg.Limit)
		// Exit as soon as the parent closes stdin (it died or gave up).
		go func() {
			var b [64]byte
			for {
				if n, err := syscall.Read(0, b[:]); n == 0 || (err != nil && err != syscall.EINTR) {
					os.Exit(3)
				}
			}
		}()
		return runLoadgen(cfg, out)
	}
	fmt.Fprintln(os.Stderr, "loopback: unknown role", role)
	return 2
}

// readLine reads one line from fd byte by byte, so that nothing after it
// is consumed.
func readLine(fd int) ([]byte, error) {
	var line []byte
	var b [1]byte
	for len(line) < 1<<20 {
		n, err := syscall.Read(fd, b[:])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n == 0 {
			return nil, io.ErrUnexpectedEOF
		}
		if b[0] == '\n' {
			return line, nil
		}
		line = append(line, b[0])
	}
	return nil, errors.New("config line too long")
}

// stdinControl watches stdin for the parent's "stop" line and for EOF by
// polling a non-blocking fd 0 from a timer-driven goroutine. A goroutine
// blocked on a read would, once woken, queue behind every runnable handler
// of a saturated GOMAXPROCS=1 backend and answer "stop" minutes late; a
// timer's goroutine runs next.
type stdinControl struct{ buf []byte }

func (c *stdinControl) poll() (stop, eof bool) {
	var b [256]byte
	for {
		n, err := syscall.Read(0, b[:])
		if err == syscall.EINTR {
			continue
		}
		if err == syscall.EAGAIN {
			break
		}
		if err != nil || n == 0 {
			return false, true
		}
		c.buf = append(c.buf, b[:n]...)
	}
	for {
		i := bytes.IndexByte(c.buf, '\n')
		if i < 0 {
			return false, false
		}
		l := strings.TrimSpace(string(c.buf[:i]))
		c.buf = c.buf[i+1:]
		if l == "stop" {
			return true, false
		}
	}
}

func hardLimit(d time.Duration) {
	if d <= 0 {
		d = 5 * time.Minute
	}
	time.AfterFunc(d, func() {
		fmt.Fprintln(os.Stderr, "loopback: child hit its hard time limit", d)
		os.Exit(4)
	})
}

// pinFromEnv pins every thread of the process to the CPU named in envCPU.
// Threads created later inherit the mask from the thread that creates them.
func pinFromEnv() (string, error) {
	v := os.Getenv(envCPU)
	if v == "" {
		return "", nil
	}
	cpu, err := strconv.Atoi(v)
	if err != nil {
		return "", fmt.Errorf("bad %s=%q", envCPU, v)
	}
	if err := PinSelf(cpu); err != nil {
		return "", err
	}
	return "cpu" + v, nil
}

// PinSelf pins every thread of this process to cpu (sched_setaffinity);
// threads created later inherit the mask from the thread that creates
// them. A test that drives load from its own process pins itself to
// Place().Loadgen, away from a backend child on Place().Backend.
func PinSelf(cpu int) error {
	var set unix.CPUSet
	set.Set(cpu)
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		if err := unix.SchedSetaffinity(tid, &set); err != nil {
			return fmt.Errorf("loopback: pin thread %d to cpu %d: %w", tid, cpu, err)
		}
	}
	return nil
}

func runBackend(cfg backendConfig, pinned string, out *childOut) int {
	work := backend.WorkFor(cfg.Work, cfg.Iterations)
	var trace io.Writer
	if cfg.Trace != "" {
		f, err := os.Create(cfg.Trace)
		if err != nil {
			out.send("error", err.Error())
			return 1
		}
		defer f.Close()
		trace = f
	}
	srv, err := backend.New(backend.Options{
		Protection: cfg.Protection,
		Work:       work,
		Start:      time.Now(),
		Horizon:    cfg.Limit + time.Minute,
		Extra:      extra,
		Levee:      cfg.Levee,
		Trace:      trace,
	})
	if err != nil {
		out.send("error", err.Error())
		return 1
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		out.send("error", err.Error())
		return 1
	}
	hs := &http.Server{
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       30 * time.Second,
		ErrorLog:          srv.ErrorLog(),
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ran := make(chan struct{})
	go func() { defer close(ran); srv.Run(ctx) }()
	// The trace file is closed (deferred above) after Run has returned.
	defer func() { cancel(); <-ran }()
	go func() { _ = srv.Serve(ln, hs) }()
	out.send("ready", Ready{Addr: ln.Addr().String(), Work: work, GOMAXPROCS: runtime.GOMAXPROCS(0), Pinned: pinned})
	if err := syscall.SetNonblock(0, true); err != nil {
		out.send("error", err.Error())
		return 1
	}
	ctl := &stdinControl{}
	tick := time.NewTicker(50 * time.Millisecond)
	for {
		<-tick.C
		stop, eof := ctl.poll()
		if eof {
			os.Exit(3)
		}
		if stop {
			break
		}
	}
	tick.Stop()
	_ = ln.Close()
	out.send("report", srv.Report())
	return 0
}

func runLoadgen(cfg loadConfig, out *childOut) int {
	h, err := load.NewHTTP(load.HTTP{URL: cfg.URL, Client: cfg.Client, Timeout: cfg.Timeout, Retries: cfg.Retries, SendDeadline: true})
	if err != nil {
		out.send("error", err.Error())
		return 2
	}
	ctx := context.Background()
	if cfg.Workers > 0 {
		rate := load.Closed(ctx, cfg.Workers, cfg.Warm, cfg.Measure, h.Once())
		out.send("capacity", rate)
		return 0
	}
	rep, err := load.Run(ctx, load.Config{
		Phases:   cfg.Phases,
		Do:       h.Func(),
		Mix:      cfg.Mix,
		Drain:    cfg.Drain,
		Limits:   load.Limits{MaxRate: load.CeilingRate, MaxDuration: load.CeilingDuration},
		Progress: func(p load.Progress) { out.send("progress", p) },
	})
	if err != nil {
		out.send("error", err.Error())
		return 1
	}
	out.send("report", rep)
	return 0
}
