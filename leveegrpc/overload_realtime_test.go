//go:build realtime

package leveegrpc

import (
	"context"
	"log/slog"
	"math"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
)

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// TestOverloadSignals runs Protect's gRPC setup on loopback: idle, then
// lightly loaded, then at 3× capacity open-loop with CPU-bound handlers
// that ignore cancellation. The queue-delay signal reads 0 with no
// traffic and stays far below its target under light load; under
// overload it moves, and the run queue's gauges (running, waiting) leave
// 0: the tap's calls go through it.
//
//	go test -tags realtime -count=1 -run TestOverloadSignals -v ./leveegrpc/
func TestOverloadSignals(t *testing.T) {
	const cost = 5 * time.Millisecond
	p, err := Protect(context.Background(), WithConfig(config.Default(), config.WithEnv(nil)),
		WithProtectOptions(leveehttp.WithLogger(slog.New(slog.DiscardHandler))))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	srv := grpc.NewServer(p.ServerOptions()...)
	srv.RegisterService(&echoDesc, &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
		spin(cost)
		return in, nil
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Stop()
	// A naive client: no levee, no retries.
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	defer cc.Close()
	queue := p.HTTP().Signals().Queue
	ctl := p.Controller()

	time.Sleep(300 * time.Millisecond)
	if v := queue.Value(); v != 0 {
		t.Errorf("queue delay with no traffic = %v, want 0", v)
	}
	var light float64
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		callEcho(context.Background(), cc, "x")
		time.Sleep(50 * time.Millisecond)
		light = math.Max(light, queue.Value())
	}
	target := queue.Target()
	t.Logf("light load: queue delay at most %.3f ms (target %.1f ms)", light*1e3, target*1e3)
	if light > target/5 {
		t.Errorf("queue delay under light load reached %.3f ms, want far below the %.1f ms target", light*1e3, target*1e3)
	}

	rate := 3 * float64(runtime.GOMAXPROCS(0)) / cost.Seconds()
	var wg sync.WaitGroup
	var peakQueue float64
	var peakRunning, peakWaiting, peakBound int
	stop := make(chan struct{})
	wg.Go(func() {
		tk := time.NewTicker(10 * time.Millisecond)
		defer tk.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tk.C:
			}
			peakQueue = math.Max(peakQueue, queue.Value())
			s := ctl.Snapshot()
			peakRunning, peakWaiting, peakBound = max(peakRunning, s.Running), max(peakWaiting, s.Waiting), max(peakBound, s.RunBound)
		}
	})
	start := time.Now()
	var calls sync.WaitGroup
	for i := 0; i < int(rate*2); i++ {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		calls.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			callEcho(ctx, cc, "x")
		})
	}
	calls.Wait()
	close(stop)
	wg.Wait()
	t.Logf("3× overload (%.0f/s): queue delay peak %.1f ms; run queue peaks: running %d, waiting %d, bound %d",
		rate, peakQueue*1e3, peakRunning, peakWaiting, peakBound)
	// Moving: a queue of milliseconds where light load left a fraction of
	// one. (How far it goes depends on how fast the other signals shed.)
	if peakQueue < max(0.001, 10*light) {
		t.Errorf("queue delay under overload peaked at %.3f ms, want it to move: ≥ 1 ms and ≥ 10× light load's %.3f ms", peakQueue*1e3, light*1e3)
	}
	if peakRunning == 0 && peakWaiting == 0 {
		t.Errorf("run queue under overload: running %d, waiting %d (bound %d); want its gauges above 0", peakRunning, peakWaiting, peakBound)
	}
}
