package limits

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/overload"
	"github.com/levee-dev/levee/pressure"
)

// The protections a lab server runs behind.
const (
	// None: a plain net/http server with Protect's timeouts
	// (ReadHeaderTimeout 10s, IdleTimeout 2m).
	None = "none"
	// Levee: leveehttp.Protect with its defaults (the goroutine ceiling
	// set when the lab has one): admission control from the CPU,
	// scheduler-latency, queue-delay and concurrency signals, and the
	// overload manager over the memory, GC, goroutine and descriptor
	// signals (its shed floor, its gate in the Handler, keep-alive and
	// timeouts on the server and its connections), exactly as a service
	// gets them.
	Levee = "levee"
	// Admit: leveehttp.Protect with overload.enabled false: admission
	// control alone, with every signal, memory included: what levee did
	// before the overload manager.
	Admit = "admit"
	// Manager: the overload manager alone, without admission control
	// (built by hand: Protect always admits).
	Manager = "overload"
)

// ServerConfig is what a lab server child reads on its stdin, one JSON
// line.
type ServerConfig struct {
	Protection string `json:"protection"`
	// Alloc is the bytes each /work request holds (a pointer-free slice,
	// every page written, so that it is resident) for Hold.
	Alloc int           `json:"alloc"`
	Hold  time.Duration `json:"hold"`
	// Goroutines is the goroutine ceiling of the goroutines signal (0:
	// none).
	Goroutines int `json:"goroutines,omitempty"`
	// NoFile, when set, is the RLIMIT_NOFILE soft limit the child sets
	// before it listens.
	NoFile uint64 `json:"nofile,omitempty"`
	// Limit is the child's longest life.
	Limit time.Duration `json:"limit"`
}

// Stats is what a lab server says about itself at /lab/stats, outside
// every protection.
type Stats struct {
	// GCSeconds and CPUSeconds are the runtime's cumulative GC CPU time
	// (idle marking left out, as pressure.GCCPU counts it) and the CPU
	// time available to Go (GOMAXPROCS × wall).
	GCSeconds  float64 `json:"gc_cpu_seconds"`
	CPUSeconds float64 `json:"cpu_seconds"`
	LiveHeap   uint64  `json:"live_heap_bytes"`
	Goroutines int     `json:"goroutines"`
	// Level is the overload manager's level now, MaxLevel the highest it
	// reached, Levels the steps it spent at each (Levee and Manager; 0
	// otherwise).
	Level    int                       `json:"level"`
	MaxLevel int                       `json:"max_level"`
	Levels   [overload.NumLevels]int64 `json:"levels"`
	// InFlight, Cap and Refused are the manager's requests in flight, its
	// cap (0: none) and the requests its gate refused; Readings its
	// resources' readings.
	InFlight int64              `json:"in_flight,omitempty"`
	Cap      int64              `json:"cap,omitempty"`
	Refused  uint64             `json:"refused,omitempty"`
	Readings map[string]float64 `json:"readings,omitempty"`
	// Served counts the /work requests the handler completed.
	Served int64 `json:"served"`
	// AdmitRejected counts the admission controller's rejections, AdmitLoad
	// is its load (Admit and Levee).
	AdmitRejected uint64  `json:"admit_rejected"`
	AdmitLoad     float64 `json:"admit_load"`
	// AdmitShed counts its overload rejections by the stage that decided
	// them (admit.Stage), AdmitShedLevel is its shed level and
	// AdmitFloor the overload manager's floor under it.
	AdmitShed      [admit.NumStages]uint64 `json:"admit_shed"`
	AdmitShedLevel float64                 `json:"admit_shed_level"`
	AdmitFloor     float64                 `json:"admit_floor"`
	// AdmitSignals are admission's signals, each value ÷ its target.
	AdmitSignals map[string]float64 `json:"admit_signals,omitempty"`
	// Concurrency is the concurrency signal's latest reading (Levee and
	// Admit; nil otherwise).
	Concurrency *ConcurrencyStats `json:"concurrency,omitempty"`
}

// ConcurrencyStats is the part of pressure.ConcurrencyReading the trace
// shows: the requests in the handler, those the service time explains,
// the waiting the target allows (NaN read as 0), the mean in-handler
// time, the learned no-wait service time B and the latency target T.
type ConcurrencyStats struct {
	InFlight, Served, Allowed float64
	Latency, B, T             time.Duration
}

// envRole marks a re-executed lab server.
const envRole = "LEVEE_LIMITS_ROLE"

// Hijack runs the lab server and exits if this process was started as
// one (Start sets the environment); otherwise it returns false at once.
// Call it first thing in TestMain.
func Hijack() bool {
	if os.Getenv(envRole) != "server" {
		return false
	}
	if err := serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "limits server:", err)
		os.Exit(1)
	}
	os.Exit(0)
	return true
}

// ready is the line a lab server writes once it listens.
type ready struct {
	Addr string `json:"addr"`
	Pid  int    `json:"pid"`
}

func serve(in io.Reader, out io.Writer) error {
	br := bufio.NewReader(in)
	line, err := br.ReadBytes('\n')
	if err != nil {
		return err
	}
	var cfg ServerConfig
	if err := json.Unmarshal(line, &cfg); err != nil {
		return err
	}
	if cfg.NoFile > 0 {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return err
		}
		rl.Cur = min(cfg.NoFile, rl.Max)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), max(cfg.Limit, time.Second))
	defer cancel()
	go func() { // the parent closes stdin to stop the child
		_, _ = io.Copy(io.Discard, br)
		cancel()
	}()

	s := &labServer{cfg: cfg}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	serveOn, shutdown, err := s.protect(ctx)
	if err != nil {
		return err
	}
	if err := json.NewEncoder(out).Encode(ready{Addr: ln.Addr().String(), Pid: os.Getpid()}); err != nil {
		return err
	}
	go func() {
		<-ctx.Done()
		sctx, c := context.WithTimeout(context.Background(), 2*time.Second)
		defer c()
		_ = shutdown(sctx)
	}()
	if err := serveOn(ln); err != http.ErrServerClosed {
		return err
	}
	s.wg.Wait()
	return nil
}

// labServer is the lab's service: /work holds memory for a while,
// /healthz answers at once, /lab/stats reports.
type labServer struct {
	cfg    ServerConfig
	served atomic.Int64
	m      *overload.Manager
	ctl    *admit.Controller
	conc   *pressure.Concurrency
	wg     sync.WaitGroup

	mu       sync.Mutex
	maxLevel overload.Level
	levels   [overload.NumLevels]int64
}

func (s *labServer) work(w http.ResponseWriter, r *http.Request) {
	b := make([]byte, max(s.cfg.Alloc, 1))
	for i := 0; i < len(b); i += 4096 {
		b[i] = 1 // resident, not a mapping of zero pages
	}
	t := time.NewTimer(s.cfg.Hold)
	select {
	case <-t.C:
	case <-r.Context().Done():
	}
	t.Stop()
	runtime.KeepAlive(b)
	s.served.Add(1)
	_, _ = io.WriteString(w, "ok\n")
}

var statsMetrics = []string{
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/gc/mark/idle:cpu-seconds",
	"/cpu/classes/total:cpu-seconds",
	"/gc/heap/live:bytes",
}

func (s *labServer) stats(w http.ResponseWriter, r *http.Request) {
	samples := make([]metrics.Sample, len(statsMetrics))
	for i, n := range statsMetrics {
		samples[i].Name = n
	}
	metrics.Read(samples)
	st := Stats{
		GCSeconds:  samples[0].Value.Float64() - samples[1].Value.Float64(),
		CPUSeconds: samples[2].Value.Float64(),
		LiveHeap:   samples[3].Value.Uint64(),
		Goroutines: runtime.NumGoroutine(),
		Served:     s.served.Load(),
	}
	s.mu.Lock()
	st.MaxLevel, st.Levels = int(s.maxLevel), s.levels
	s.mu.Unlock()
	if s.m != nil {
		o := s.m.Status()
		st.Level, st.InFlight, st.Cap = int(o.Level), o.InFlight, o.Cap
		for _, row := range o.Refused {
			for _, n := range row {
				st.Refused += n
			}
		}
		st.Readings = map[string]float64{}
		for _, r := range o.Resources {
			if !math.IsNaN(r.Value) {
				st.Readings[r.Name] = r.Value
			}
		}
	}
	if s.ctl != nil {
		snap := s.ctl.Snapshot()
		for c := range snap.Rejected {
			for r := range snap.Rejected[c] {
				st.AdmitRejected += snap.Rejected[c][r]
			}
		}
		st.AdmitLoad = snap.Load
		if s.conc != nil {
			r := s.conc.Reading()
			finite := func(x float64) float64 {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					return 0
				}
				return x
			}
			st.Concurrency = &ConcurrencyStats{InFlight: finite(r.InFlight), Served: finite(r.Served), Allowed: finite(r.Allowed),
				Latency: r.Latency, B: r.ServiceTime, T: r.LatencyTarget}
		}
		for c := range snap.Shed {
			for g := range snap.Shed[c] {
				st.AdmitShed[g] += snap.Shed[c][g]
			}
		}
		st.AdmitShedLevel, st.AdmitFloor = snap.ShedLevel, snap.OverloadShed
		st.AdmitSignals = map[string]float64{}
		for _, sg := range snap.Signals {
			if r := sg.Value / sg.Target; !math.IsNaN(r) && !math.IsInf(r, 0) {
				st.AdmitSignals[sg.Name] = r
			}
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(st)
}

// protect builds the server of the configured protection and starts its
// loops under ctx: it returns how to serve on a listener and how to shut
// the server down.
func (s *labServer) protect(ctx context.Context) (serve func(net.Listener) error, shutdown func(context.Context) error, err error) {
	app := http.NewServeMux()
	app.HandleFunc("/work", s.work)
	app.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	app.HandleFunc("/lab/stats", s.stats)
	switch s.cfg.Protection {
	case Levee, Admit:
		// Protect as a service calls it; /lab/stats is listed among the
		// health paths so that it is served outside every protection.
		cfg := config.Default()
		cfg.Signals.Goroutines.Limit = s.cfg.Goroutines
		cfg.Overload.Enabled = s.cfg.Protection == Levee
		cfg.HTTP.HealthPaths = append(cfg.HTTP.HealthPaths, "/lab/stats")
		p, err := leveehttp.Protect(ctx, app, leveehttp.WithConfig(cfg, config.WithEnv(nil)),
			leveehttp.WithLogger(slog.Default()), leveehttp.WithOverloadOptions(overload.WithObserver(s.observe)))
		if err != nil {
			return nil, nil, err
		}
		s.ctl, s.conc = p.Controller(), p.Signals().Concurrency
		if o := p.Overload(); o != nil {
			s.m = o.Manager()
			s.wg.Go(func() { s.countLevels(ctx) })
		}
		return p.Serve, p.Shutdown, nil
	case None, Manager:
	default:
		return nil, nil, fmt.Errorf("limits: unknown protection %q", s.cfg.Protection)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, ConnContext: leveehttp.ConnContext, Handler: app}
	wrap := leveehttp.Listener
	if s.cfg.Protection == Manager {
		set, err := pressure.Default(pressure.WithGoroutineLimit(s.cfg.Goroutines))
		if err != nil {
			return nil, nil, err
		}
		s.wg.Go(func() { set.Run(ctx) })
		s.m = overload.New(overload.WithResources(overload.Resources(set)...),
			overload.WithLogger(slog.Default()), overload.WithObserver(s.observe))
		s.wg.Go(func() { s.m.Run(ctx) })
		s.wg.Go(func() { s.countLevels(ctx) })
		o := leveehttp.NewOverload(s.m, leveehttp.WithOverloadServer(srv),
			leveehttp.WithOverloadHealth(func(r *http.Request) bool { return r.URL.Path == "/healthz" || r.URL.Path == "/lab/stats" }))
		srv.Handler = o.Wrap(app)
		srv.ConnState = o.ConnState
		wrap = func(ln net.Listener) net.Listener { return leveehttp.Listener(o.Listener(ln)) }
	}
	return func(ln net.Listener) error { return srv.Serve(wrap(ln)) }, srv.Shutdown, nil
}

// countLevels counts the manager's steps at each level until ctx is done.
func (s *labServer) countLevels(ctx context.Context) {
	t := time.NewTicker(s.m.Period())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			l := s.m.Level()
			s.mu.Lock()
			if l >= 0 && l < overload.NumLevels {
				s.levels[l]++
			}
			s.maxLevel = max(s.maxLevel, l)
			s.mu.Unlock()
		}
	}
}

func (s *labServer) observe(e overload.Event) {
	if e.Kind != overload.LevelChanged {
		return
	}
	s.mu.Lock()
	s.maxLevel = max(s.maxLevel, e.Level)
	s.mu.Unlock()
}
