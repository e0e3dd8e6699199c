package grpclab

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee/leveegrpc"
	"github.com/levee-dev/levee/tools/backend"
	"github.com/levee-dev/levee/tools/load"
	"github.com/levee-dev/levee/tools/loopback"
	"github.com/levee-dev/levee/tools/report"
)

// Backend is a running backend child.
type Backend struct {
	Ready
	cmd *exec.Cmd
	in  io.WriteCloser
	out *bufio.Reader
}

// StartBackend starts a backend child, pinned to loopback.Place().Backend
// with GOMAXPROCS=1, serving with protection (backend.None or
// backend.Levee) and work of CPU per call; it exits after limit at the
// latest, and with this process.
func StartBackend(ctx context.Context, protection string, work, limit time.Duration) (*Backend, error) {
	return startBackend(ctx, backendConfig{Protection: protection, Work: work, Limit: limit})
}

func startBackend(ctx context.Context, cfg backendConfig) (*Backend, error) {
	if cfg.Iterations <= 0 {
		cfg.Iterations = loopback.Calibrated(cfg.Work)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envRole+"=backend", "GOMAXPROCS=1")
	if cpu := loopback.Place().Backend; cpu >= 0 {
		cmd.Env = append(cmd.Env, envCPU+"="+strconv.Itoa(cpu))
	}
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	b := &Backend{cmd: cmd, in: in, out: bufio.NewReader(outPipe)}
	b0, _ := json.Marshal(cfg)
	if _, err := in.Write(append(b0, '\n')); err != nil {
		b.kill()
		return nil, err
	}
	if err := b.next("ready", &b.Ready); err != nil {
		b.kill()
		return nil, err
	}
	loopback.KeepCalibrated(b.Work)
	return b, nil
}

func (b *Backend) kill() {
	_ = b.cmd.Process.Kill()
	_ = b.cmd.Wait()
}

// next reads the child's next line, which must be of kind.
func (b *Backend) next(kind string, v any) error {
	s, err := b.out.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("grpclab: backend: %w", err)
	}
	var l line
	if err := json.Unmarshal(s, &l); err != nil {
		return fmt.Errorf("grpclab: backend said %q: %w", s, err)
	}
	if l.Kind != kind {
		return fmt.Errorf("grpclab: backend: %s %s, want %s", l.Kind, l.Data, kind)
	}
	return json.Unmarshal(l.Data, v)
}

// Stop stops the backend and returns its report.
func (b *Backend) Stop() (backend.Report, error) {
	var r backend.Report
	if _, err := io.WriteString(b.in, "stop\n"); err != nil {
		b.kill()
		return r, err
	}
	err := b.next("report", &r)
	_ = b.in.Close()
	_ = b.cmd.Wait()
	return r, err
}

// Dial connects to addr as a naive client would: plain gRPC, grpc-go's
// retry off.
func Dial(addr string) (*grpc.ClientConn, error) {
	return grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
}

// Naive returns the load generator's request function for a naive client
// on cc: one deadline of timeout for the whole request, within which it
// retries at once, up to retries times, whatever failed.
func Naive(cc *grpc.ClientConn, timeout time.Duration, retries int) load.Func {
	req := wrapperspb.String("x")
	return func(ctx context.Context, c *load.Call) load.Outcome {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		o, f := load.Failed, load.OtherFailure
		for a := 0; a <= retries; a++ {
			c.Attempt()
			err := cc.Invoke(ctx, Method, req, new(wrapperspb.StringValue))
			o, f = Classify(ctx, err)
			if o == load.Goodput || ctx.Err() != nil {
				break
			}
		}
		c.Failure = f
		return o
	}
}

// Classify maps a call's result to the load generator's outcome: OK
// before the deadline is Goodput; a levee rejection (status details or
// pushback) Rejected; a deadline the client's own Failed as a timeout;
// anything else Failed.
func Classify(ctx context.Context, err error) (load.Outcome, load.Failure) {
	switch {
	case err == nil && ctx.Err() == nil:
		return load.Goodput, load.OtherFailure
	case err == nil:
		return load.Failed, load.Timeout // a late success
	case ctx.Err() != nil:
		return load.Failed, load.Timeout // the client's own deadline
	case leveegrpc.Rejection(err, nil) != nil:
		return load.Rejected, load.OtherFailure
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled:
		return load.Failed, load.Timeout
	case codes.Unavailable:
		return load.Failed, load.Reset
	}
	return load.Failed, load.OtherFailure
}

// Config describes one run: a fresh backend, load from this process.
type Config struct {
	Name       string
	Protection string // backend.None or backend.Levee
	Work       time.Duration
	Timeout    time.Duration // the whole request's deadline; default 1s
	Retries    int
	Phases     []load.Phase
	Drain      time.Duration // default 3s
	// SnapshotTrace, if set (Levee protection only), is a file the
	// backend writes its controller's snapshot to every 20 ms, one JSON
	// backend.TraceLine a line (the HTTP lab's loopback.Config.SnapshotTrace
	// writes the same lines every 50 ms).
	SnapshotTrace string
}

// Result is one run's outcome, client and server side.
type Result struct {
	Config  Config
	Load    *load.Result
	Server  backend.Report
	Backend Ready
}

// Run runs cfg: it starts a backend, pins this process to
// loopback.Place().Loadgen, drives the phases open-loop and stops the
// backend.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Timeout <= 0 {
		cfg.Timeout = time.Second
	}
	if cfg.Drain <= 0 {
		cfg.Drain = 3 * time.Second
	}
	var total time.Duration
	for _, p := range cfg.Phases {
		total += p.Duration
	}
	b, err := startBackend(ctx, backendConfig{Protection: cfg.Protection, Work: cfg.Work, Limit: total + cfg.Drain + time.Minute, Trace: cfg.SnapshotTrace})
	if err != nil {
		return nil, err
	}
	if cpu := loopback.Place().Loadgen; cpu >= 0 {
		if err := loopback.PinSelf(cpu); err != nil {
			b.kill()
			return nil, err
		}
	}
	cc, err := Dial(b.Addr)
	if err != nil {
		b.kill()
		return nil, err
	}
	defer cc.Close()
	lr, lerr := load.Run(ctx, load.Config{
		Phases: cfg.Phases,
		Do:     Naive(cc, cfg.Timeout, cfg.Retries),
		Drain:  cfg.Drain,
		Limits: load.Limits{MaxRate: load.CeilingRate, MaxDuration: load.CeilingDuration},
	})
	rep, serr := b.Stop()
	if err := errors.Join(lerr, serr); err != nil {
		return nil, err
	}
	return &Result{Config: cfg, Load: lr, Server: rep, Backend: b.Ready}, nil
}

// Run converts both sides into a run of levee's report schema, as the
// HTTP lab does (loopback.Result.Run): the generator's phases and series,
// the backend as the run's one instance, the share of handler runs wasted.
func (r *Result) Run() report.Run {
	lr := loopback.Result{
		Config: loopback.Config{Name: r.Config.Name, Protection: r.Config.Protection, Client: loopback.Naive},
		Load:   r.Load,
		Server: r.Server,
	}
	return lr.Run("")
}

// Capacity measures the bare backend's closed-loop peak: workers callers
// without pause for d after a second of warm-up.
func Capacity(ctx context.Context, work time.Duration, workers int, d time.Duration) (float64, Ready, error) {
	b, err := StartBackend(ctx, backend.None, work, d+time.Minute)
	if err != nil {
		return 0, Ready{}, err
	}
	if cpu := loopback.Place().Loadgen; cpu >= 0 {
		_ = loopback.PinSelf(cpu)
	}
	cc, err := Dial(b.Addr)
	if err != nil {
		b.kill()
		return 0, Ready{}, err
	}
	defer cc.Close()
	req := wrapperspb.String("x")
	rate := load.Closed(ctx, workers, time.Second, d, func(ctx context.Context) load.Outcome {
		ctx, cancel := context.WithTimeout(ctx, time.Second)
		defer cancel()
		o, _ := Classify(ctx, cc.Invoke(ctx, Method, req, new(wrapperspb.StringValue)))
		return o
	})
	_, err = b.Stop()
	return rate, b.Ready, err
}
