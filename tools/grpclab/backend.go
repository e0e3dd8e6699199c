package grpclab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveegrpc"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/loopback"
)

// Environment of the re-executed backend.
const (
	envRole = "LEVEE_GRPCLAB_ROLE" // "backend"
	envCPU  = "LEVEE_GRPCLAB_CPU"  // CPU to pin every thread to; unset = unpinned
)

// Method is the lab's one unary method.
const Method = "/levee.lab.Work/Do"

// Hijack runs the backend and exits the process if this process was
// started by the lab as one; otherwise it returns false at once.
func Hijack() bool {
	if os.Getenv(envRole) != "backend" {
		return false
	}
	os.Exit(runBackend())
	return true
}

// backendConfig is the line the backend reads on stdin.
type backendConfig struct {
	Protection string        `json:"protection"` // backend.None or backend.Levee
	Work       time.Duration `json:"work"`
	// Iterations, when above 0, is the work's Spin count as calibrated by
	// an earlier backend of the same parent (loopback.Calibrated).
	Iterations int           `json:"iterations,omitempty"`
	Limit      time.Duration `json:"limit"`
	// ForceShed makes levee refuse every call (admit.Controller.ForceShed
	// at level 4 for the backend's lifetime): what a refusal costs.
	ForceShed bool `json:"force_shed,omitempty"`
	// Trace is a file to write the controller's snapshots to (Levee only;
	// Config.SnapshotTrace).
	Trace string `json:"trace,omitempty"`
}

// Ready is what the backend says once it serves.
type Ready struct {
	Addr       string       `json:"addr"`
	Work       backend.Work `json:"work"`
	GOMAXPROCS int          `json:"gomaxprocs"`
	Pinned     string       `json:"pinned"`
}

type line struct {
	Kind string          `json:"kind"` // ready, report, error
	Data json.RawMessage `json:"data"`
}

func send(kind string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		kind = "error"
		b, _ = json.Marshal(err.Error())
	}
	json.NewEncoder(os.Stdout).Encode(line{Kind: kind, Data: b})
}

// finite returns x, or 0 for NaN and infinities (readings not yet taken).
func finite(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// workDesc is the lab's service, registered by hand: Do takes and returns
// a google.protobuf.StringValue.
func workDesc(handle func(ctx context.Context) (*wrapperspb.StringValue, error)) *grpc.ServiceDesc {
	return &grpc.ServiceDesc{
		ServiceName: "levee.lab.Work",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Do",
			Handler: func(_ any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
				in := new(wrapperspb.StringValue)
				if err := dec(in); err != nil {
					return nil, err
				}
				h := func(ctx context.Context, _ any) (any, error) { return handle(ctx) }
				if ic == nil {
					return h(ctx, in)
				}
				return ic(ctx, in, &grpc.UnaryServerInfo{FullMethod: Method}, h)
			},
		}},
	}
}

// counters are the backend's per-100ms buckets.
type counters struct {
	start   time.Time
	runs    []atomic.Int64
	late    []atomic.Int64
	mu      sync.Mutex
	rej     []int64              // controller rejections per bucket (levee)
	shed    []float64            // max shed level per bucket (levee)
	bound   []float64            // max run-queue bound per bucket
	waiting []float64            // max run-queue waiters per bucket
	load    []float64            // max load per bucket
	capRPS  []float64            // the controller's capacity estimate, last per bucket
	sigs    map[string][]float64 // max value ÷ target per signal and bucket
}

const res = 100 * time.Millisecond

func newCounters(start time.Time, horizon time.Duration) *counters {
	n := int(horizon/res) + 1
	return &counters{start: start, runs: make([]atomic.Int64, n), late: make([]atomic.Int64, n),
		rej: make([]int64, n), shed: make([]float64, n), bound: make([]float64, n), waiting: make([]float64, n),
		load: make([]float64, n), capRPS: make([]float64, n), sigs: map[string][]float64{}}
}

func (c *counters) at(t time.Time) int { return min(max(int(t.Sub(c.start)/res), 0), len(c.runs)-1) }

// watch samples the controller every 20 ms into the buckets, and into
// tr when not nil.
func (c *counters) watch(ctx context.Context, ctl *admit.Controller, tr *backend.Tracer) {
	tk := time.NewTicker(20 * time.Millisecond)
	defer tk.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tk.C:
			s := ctl.Snapshot()
			tr.Write(s)
			var rej uint64
			for _, r := range s.Rejected {
				for _, n := range r {
					rej += n
				}
			}
			i := c.at(now)
			c.mu.Lock()
			c.rej[i] += int64(rej - last)
			c.shed[i] = max(c.shed[i], finite(s.ShedLevel))
			c.bound[i] = max(c.bound[i], float64(s.RunBound))
			c.waiting[i] = max(c.waiting[i], float64(s.Waiting))
			c.load[i] = max(c.load[i], finite(s.Load))
			c.capRPS[i] = finite(s.CapacityRPS)
			backend.MaxSignals(c.sigs, len(c.runs), i, s.Signals)
			c.mu.Unlock()
			last = rej
		}
	}
}

// report returns the counters in tools/backend's report form.
func (c *counters) report(protection string, w backend.Work, ctl *admit.Controller) backend.Report {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.runs)
	for n > 0 && c.runs[n-1].Load() == 0 && c.rej[n-1] == 0 {
		n--
	}
	s := backend.Series{Start: c.start, Resolution: res,
		Runs: make([]int64, n), Late: make([]int64, n), OK: make([]int64, n), OKLate: make([]int64, n), Rejected: make([]int64, n), Other: make([]int64, n)}
	for i := 0; i < n; i++ {
		s.Runs[i], s.Late[i] = c.runs[i].Load(), c.late[i].Load()
		s.OK[i], s.OKLate[i] = s.Runs[i], s.Late[i] // every run answers OK
		s.Rejected[i] = c.rej[i]
	}
	r := backend.Report{Protection: protection, Work: w, Series: s, CPU: processCPU()}
	if ctl != nil {
		r.ShedLevel = append([]float64(nil), c.shed[:n]...)
		r.RunBound = append([]float64(nil), c.bound[:n]...)
		r.RunWaiting = append([]float64(nil), c.waiting[:n]...)
		r.Load = append([]float64(nil), c.load[:n]...)
		r.CapacityRPS = append([]float64(nil), c.capRPS[:n]...)
		r.Signals = map[string][]float64{}
		for name, v := range c.sigs {
			r.Signals[name] = append([]float64(nil), v[:n]...)
		}
		snap := ctl.Snapshot()
		for _, a := range snap.Admitted {
			r.Admitted += a
		}
		for _, rr := range snap.Rejected {
			for _, x := range rr {
				r.Rejected += x
			}
		}
	}
	return r
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runBackend() int {
	pinned := ""
	if v := os.Getenv(envCPU); v != "" {
		if cpu, err := strconv.Atoi(v); err == nil && loopback.PinSelf(cpu) == nil {
			pinned = "cpu" + v
		}
	}
	in := bufio.NewReader(os.Stdin)
	b, err := in.ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "grpclab: no config:", err)
		return 2
	}
	var cfg backendConfig
	if err := json.Unmarshal(b, &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "grpclab: bad config:", err)
		return 2
	}
	if cfg.Limit <= 0 {
		cfg.Limit = 5 * time.Minute
	}
	time.AfterFunc(cfg.Limit, func() { fmt.Fprintln(os.Stderr, "grpclab: hard time limit"); os.Exit(4) })

	work := backend.WorkFor(cfg.Work, cfg.Iterations)
	c := newCounters(time.Now(), cfg.Limit+time.Minute)
	handle := func(ctx context.Context) (*wrapperspb.StringValue, error) {
		x := backend.Spin(work.Iterations, uint64(time.Now().UnixNano())) // ignores ctx
		now := time.Now()
		i := c.at(now)
		c.runs[i].Add(1)
		if dl, ok := ctx.Deadline(); ok && now.After(dl) {
			c.late[i].Add(1)
		}
		return wrapperspb.String(strconv.FormatUint(x&0xffff, 10)), nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var opts []grpc.ServerOption
	var ctl *admit.Controller
	var tr *backend.Tracer // nil: no trace
	switch cfg.Protection {
	case backend.None, "":
	case backend.Levee:
		// Wired exactly as leveegrpc's documentation gives it.
		p, err := leveegrpc.Protect(ctx, leveegrpc.WithConfig(config.Default(), config.WithEnv(nil)),
			leveegrpc.WithProtectOptions(leveehttp.WithLogger(slog.New(slog.DiscardHandler))))
		if err != nil {
			send("error", err.Error())
			return 1
		}
		defer p.Close()
		opts = p.ServerOptions()
		ctl = p.Controller()
		if cfg.ForceShed {
			ctl.ForceShed(4, time.Now().Add(cfg.Limit))
		}
		if cfg.Trace != "" {
			f, err := os.Create(cfg.Trace)
			if err != nil {
				send("error", err.Error())
				return 1
			}
			defer f.Close()
			tr = backend.NewTracer(f, c.start)
		}
		go c.watch(ctx, ctl, tr)
	default:
		send("error", "unknown protection "+cfg.Protection)
		return 2
	}
	srv := grpc.NewServer(opts...)
	srv.RegisterService(workDesc(handle), nil)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		send("error", err.Error())
		return 1
	}
	go srv.Serve(ln)
	send("ready", Ready{Addr: ln.Addr().String(), Work: work, GOMAXPROCS: runtime.GOMAXPROCS(0), Pinned: pinned})
	for {
		l, err := in.ReadString('\n')
		if err == io.EOF || err != nil {
			os.Exit(3)
		}
		if l == "stop\n" {
			break
		}
	}
	srv.Stop()
	rep := c.report(cfg.Protection, work, ctl)
	if err := tr.Err(); err != nil {
		rep.TraceErr = err.Error()
	}
	send("report", rep)
	return 0
}
