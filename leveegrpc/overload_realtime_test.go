//go:build realtime

package leveegrpc

import (
	"context"
	"log/slog"
	"math"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/pressure"
)

func spin(d time.Duration) {
	for end := time.Now().Add(d); time.Now().Before(end); {
	}
}

// overloadLab is a loopback gRPC server of CPU-bound handlers (5 ms each,
// ignoring cancellation) and a naive client: no levee, no retries.
type overloadLab struct {
	cc *grpc.ClientConn
}

const labCost = 5 * time.Millisecond

func newOverloadLab(t *testing.T, opts ...grpc.ServerOption) *overloadLab {
	t.Helper()
	srv := grpc.NewServer(opts...)
	srv.RegisterService(&echoDesc, &echoImpl{unary: func(ctx context.Context, in string) (string, error) {
		spin(labCost)
		return in, nil
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	cc, err := grpc.NewClient("passthrough:///"+ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDisableRetry())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cc.Close() })
	return &overloadLab{cc: cc}
}

// light sends one call every 50 ms for a second and returns the highest
// reading of f seen after each.
func (l *overloadLab) light(f func() float64) float64 {
	var peak float64
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		callEcho(context.Background(), l.cc, "x")
		time.Sleep(50 * time.Millisecond)
		peak = math.Max(peak, f())
	}
	return peak
}

// overload sends 3× the cores' capacity open-loop for d, each call with a
// 1 s deadline, calls watch every 10 ms until every call has ended, and
// returns the rate and the calls served.
func (l *overloadLab) overload(d time.Duration, watch func()) (rate float64, served int64) {
	rate = 3 * float64(runtime.GOMAXPROCS(0)) / labCost.Seconds()
	var ok atomic.Int64
	var wg sync.WaitGroup
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
			watch()
		}
	})
	start := time.Now()
	var calls sync.WaitGroup
	for i := 0; i < int(rate*d.Seconds()); i++ {
		time.Sleep(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
		calls.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if _, err := callEcho(ctx, l.cc, "x"); err == nil {
				ok.Add(1)
			}
		})
	}
	calls.Wait()
	close(stop)
	wg.Wait()
	return rate, ok.Load()
}

// TestQueueDelaySignal measures the queue-delay signal on its own: a
// Server with WithQueueDelay and no controller, so nothing sheds and the
// calls of a 3× overload must wait for a core. The signal reads 0 with no
// traffic, stays far below its target under light load, and under the
// overload moves: milliseconds where light load left a fraction of one.
// (With a controller the signal may stay low: the controller's other
// signals and its meter can shed before a queue stands; see
// TestOverloadProtected.)
//
//	go test -tags realtime -count=1 -run TestQueueDelaySignal -v ./leveegrpc/
func TestQueueDelaySignal(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	queue := pressure.NewQueueDelay()
	go queue.Run(ctx)
	s := NewServer(nil, WithQueueDelay(queue))
	lab := newOverloadLab(t, s.ServerOptions()...)

	time.Sleep(300 * time.Millisecond)
	if v := queue.Value(); v != 0 {
		t.Errorf("queue delay with no traffic = %v, want 0", v)
	}
	light := lab.light(queue.Value)
	target := queue.Target()
	t.Logf("light load: queue delay at most %.3f ms (target %.1f ms)", light*1e3, target*1e3)
	if light > target/5 {
		t.Errorf("queue delay under light load reached %.3f ms, want far below the %.1f ms target", light*1e3, target*1e3)
	}
	var peak float64
	rate, served := lab.overload(time.Second, func() { peak = math.Max(peak, queue.Value()) })
	t.Logf("3× overload (%.0f/s for 1 s), unprotected: %d served; queue delay peak %.1f ms", rate, served, peak*1e3)
	if peak < max(0.001, 10*light) {
		t.Errorf("queue delay under overload peaked at %.3f ms, want it to move: ≥ 1 ms and ≥ 10× light load's %.3f ms", peak*1e3, light*1e3)
	}
}

// TestOverloadProtected runs Protect's gRPC setup on loopback under the
// same 3× overload: the tap's calls go through the run queue (its gauges
// leave 0), and the queue-delay signal reads 0 when idle and is fed by
// the calls (an interval observes them; it reads a number, never NaN).
//
//	go test -tags realtime -count=1 -run TestOverloadProtected -v ./leveegrpc/
func TestOverloadProtected(t *testing.T) {
	p, err := Protect(context.Background(), WithConfig(config.Default(), config.WithEnv(nil)),
		WithProtectOptions(leveehttp.WithLogger(slog.New(slog.DiscardHandler))))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	lab := newOverloadLab(t, p.ServerOptions()...)
	queue := p.HTTP().Signals().Queue
	ctl := p.Controller()

	time.Sleep(300 * time.Millisecond)
	if v := queue.Value(); v != 0 {
		t.Errorf("queue delay with no traffic = %v, want 0", v)
	}
	light := lab.light(queue.Value)
	var peakQueue float64
	var peakRunning, peakWaiting, peakBound int
	observed := false
	rate, served := lab.overload(2*time.Second, func() {
		peakQueue = math.Max(peakQueue, queue.Value())
		observed = observed || queue.Reading().Observed
		s := ctl.Snapshot()
		peakRunning, peakWaiting, peakBound = max(peakRunning, s.Running), max(peakWaiting, s.Waiting), max(peakBound, s.RunBound)
	})
	t.Logf("light load: queue delay at most %.3f ms; 3× overload (%.0f/s for 2 s): %d served; queue delay peak %.1f ms; run queue peaks: running %d, waiting %d, bound %d",
		light*1e3, rate, served, peakQueue*1e3, peakRunning, peakWaiting, peakBound)
	if math.IsNaN(peakQueue) || !observed {
		t.Errorf("queue delay under overload: peak %v, an interval with calls observed %v; want a number, fed by the stats handler Protect installs", peakQueue, observed)
	}
	if peakRunning == 0 && peakWaiting == 0 {
		t.Errorf("run queue under overload: running %d, waiting %d (bound %d); want its gauges above 0", peakRunning, peakWaiting, peakBound)
	}
}
