package proxylab

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/proxy"
	"github.com/levee-dev/levee/tools/load"
)

// envRole names the role of a re-executed child.
const envRole = "LEVEE_PROXYLAB_ROLE"

// Roles of a child process.
const (
	RoleFixed   = "fixed"   // a Fixed backend
	RoleBare    = "bare"    // a bare httputil.ReverseProxy, round robin
	RoleClassic = "classic" // Classic
	RoleLevee   = "levee"   // levee's proxy.Handler
)

// Child configures a child process.
type Child struct {
	Role string `json:"role"`
	// Listen is the address to serve on; "" picks a free loopback port.
	Listen string `json:"listen"`
	// GOMAXPROCS of the child; 0 leaves the default.
	GOMAXPROCS int `json:"-"`
	// Workers and Hold configure a Fixed backend.
	Workers int           `json:"workers,omitempty"`
	Hold    time.Duration `json:"hold,omitempty"`
	// Backends are the proxies' backends (host:port).
	Backends []string `json:"backends,omitempty"`
	// Classic configures a Classic balancer (its Backends are Backends).
	Classic ClassicConfig `json:"classic"`
	// Proxy configures levee's proxy (its static backends are Backends);
	// nil means proxy.DefaultConfig().
	Proxy *proxy.Config `json:"proxy,omitempty"`
}

// ClassicStatsPath serves a Classic child's ejections and backends out,
// as JSON.
const ClassicStatsPath = "/_classic"

// ClassicStats are a Classic balancer's counters.
type ClassicStats struct {
	Ejections int64 `json:"ejections"`
	Down      int   `json:"down"`
}

// Hijack runs a child role and exits if this process was started as one;
// otherwise it returns false at once. Call it first thing in TestMain (or
// main) of a program that uses Start.
func Hijack() bool {
	if os.Getenv(envRole) == "" {
		return false
	}
	os.Exit(runChild())
	return true
}

// runChild reads its Child configuration from stdin, serves on loopback,
// writes {"addr": …} on stdout when ready, and exits when stdin closes.
func runChild() int {
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadBytes('\n')
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxylab: no configuration:", err)
		return 2
	}
	var c Child
	if err := json.Unmarshal(line, &c); err != nil {
		fmt.Fprintln(os.Stderr, "proxylab:", err)
		return 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h, err := c.handler(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxylab:", err)
		return 2
	}
	listen := c.Listen
	if listen == "" {
		listen = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, "proxylab:", err)
		return 2
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ErrorLog: nil}
	go func() { _ = srv.Serve(ln) }()
	out, _ := json.Marshal(map[string]string{"addr": ln.Addr().String()})
	fmt.Println(string(out))
	_, _ = io.Copy(io.Discard, in) // until the parent closes stdin or dies
	return 0
}

func (c *Child) handler(ctx context.Context) (http.Handler, error) {
	switch c.Role {
	case RoleFixed:
		return NewFixed(c.Workers, c.Hold), nil
	case RoleBare:
		return bareProxy(c.Backends), nil
	case RoleClassic:
		cc := c.Classic
		cc.Backends = c.Backends
		cl := NewClassic(cc)
		go cl.Run(ctx)
		mux := http.NewServeMux()
		mux.HandleFunc(ClassicStatsPath, func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(ClassicStats{Ejections: cl.Ejections(), Down: cl.Down()})
		})
		mux.Handle("/", cl)
		return mux, nil
	case RoleLevee:
		cfg := c.Proxy
		if cfg == nil {
			cfg = proxy.DefaultConfig()
		}
		cfg.Backends.Static = nil
		for _, b := range c.Backends {
			cfg.Backends.Static = append(cfg.Backends.Static, proxy.Endpoint{Address: b})
		}
		// As the levee proxy command runs it: the edge's own controller
		// on the proxy's resources, the run queue off.
		log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		set, err := config.Default().Signals.Set()
		if err != nil {
			return nil, err
		}
		ctl := admit.New(admit.WithSignals(set.Signals()...), admit.WithRunQueue(0), admit.WithRoute(leveehttp.Route))
		h, err := proxy.New(cfg, proxy.WithLogger(log), proxy.WithController(ctl),
			proxy.WithHandlerOptions(leveehttp.WithQueueDelay(set.Queue), leveehttp.WithConcurrency(set.Concurrency)))
		if err != nil {
			return nil, err
		}
		go set.Run(ctx)
		go ctl.Run(ctx)
		go h.Run(ctx)
		return h, nil
	}
	return nil, fmt.Errorf("unknown role %q", c.Role)
}

// bareProxy is httputil.ReverseProxy as most Go programs set it up: round
// robin over the backends, nothing else (no buffer pool, no health).
func bareProxy(backends []string) http.Handler {
	var n atomic.Uint64
	urls := make([]*url.URL, len(backends))
	for i, b := range backends {
		urls[i] = &url.URL{Scheme: "http", Host: b}
	}
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(urls[int(n.Add(1)%uint64(len(urls)))])
			pr.SetXForwarded()
		},
		Transport: &http.Transport{MaxIdleConnsPerHost: 256},
	}
}

// Proc is a child process of the harness (or nginx).
type Proc struct {
	Addr string
	cmd  *exec.Cmd
	in   io.WriteCloser
	errs *tailBuffer
	once sync.Once
	done chan struct{}
}

// Start re-executes the current binary (which must call Hijack first) as
// the child c and waits until it serves. The child dies with ctx, with
// this process (Pdeathsig) and when Stop closes its stdin.
func Start(ctx context.Context, c Child) (*Proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), envRole+"="+c.Role)
	if c.GOMAXPROCS > 0 {
		cmd.Env = append(cmd.Env, "GOMAXPROCS="+strconv.Itoa(c.GOMAXPROCS))
	}
	line, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	p, out, err := startProc(cmd)
	if err != nil {
		return nil, err
	}
	if _, err := p.in.Write(append(line, '\n')); err != nil {
		p.Kill()
		return nil, err
	}
	sc := bufio.NewScanner(out)
	ready := make(chan error, 1)
	go func() {
		if !sc.Scan() {
			ready <- fmt.Errorf("proxylab: %s child exited: %s", c.Role, p.errs.String())
			return
		}
		var m map[string]string
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil || m["addr"] == "" {
			ready <- fmt.Errorf("proxylab: %s child said %q", c.Role, sc.Text())
			return
		}
		p.Addr = m["addr"]
		ready <- nil
		_, _ = io.Copy(io.Discard, out)
	}()
	select {
	case err := <-ready:
		if err != nil {
			p.Kill()
			return nil, err
		}
	case <-time.After(30 * time.Second):
		p.Kill()
		return nil, fmt.Errorf("proxylab: %s child not ready after 30s", c.Role)
	}
	return p, nil
}

func startProc(cmd *exec.Cmd) (*Proc, io.Reader, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	p := &Proc{cmd: cmd, errs: &tailBuffer{}, done: make(chan struct{})}
	cmd.Stderr = p.errs
	var err error
	if p.in, err = cmd.StdinPipe(); err != nil {
		return nil, nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, err
	}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, out, nil
}

// Kill kills the process at once (SIGKILL: no goodbye to its
// connections), as a crashed backend dies.
func (p *Proc) Kill() {
	p.once.Do(func() {
		_ = p.in.Close()
		if p.cmd.Process != nil {
			_ = p.cmd.Process.Kill()
		}
	})
	<-p.done
}

// Stop asks the process to exit (closing its stdin), killing it after 5 s.
func (p *Proc) Stop() {
	_ = p.in.Close()
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		p.Kill()
	}
}

// Stderr returns the end of what the process wrote on stderr.
func (p *Proc) Stderr() string { return p.errs.String() }

// CPU returns the CPU time the process used so far: the sum over its
// threads of /proc/<pid>/task/<tid>/schedstat (nanoseconds), or, where
// that is missing, utime + stime (10 ms ticks, load.ProcessCPU).
func (p *Proc) CPU() (time.Duration, error) { return procCPU(p.cmd.Process.Pid) }

func procCPU(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	tasks, err := os.ReadDir(dir + "/task")
	if err == nil {
		var sum time.Duration
		ok := true
		for _, t := range tasks {
			b, err := os.ReadFile(dir + "/task/" + t.Name() + "/schedstat")
			if err != nil {
				ok = false
				break
			}
			f := strings.Fields(string(b))
			if len(f) == 0 {
				ok = false
				break
			}
			ns, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				ok = false
				break
			}
			sum += time.Duration(ns)
		}
		if ok {
			return sum, nil
		}
	}
	// utime + stime from /proc/<pid>/stat, in 10 ms ticks.
	pc := load.ProcessCPU{PID: pid}
	r, err := pc.Read(context.Background())
	if err != nil {
		return 0, err
	}
	return time.Duration(r.Seconds * float64(time.Second)), nil
}

// tailBuffer keeps the last 8 KiB written to it.
type tailBuffer struct {
	mu sync.Mutex
	b  []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = t.b[len(t.b)-8<<10:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
