package grpclab

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee/tools/backend"
)

// TestBackendTrace: a levee gRPC backend given a trace file writes its
// controller's snapshots there, one backend.TraceLine a line, as the HTTP
// lab's backends do; the calls it served show in the last line.
func TestBackendTrace(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	b, err := startBackend(ctx, backendConfig{Protection: backend.Levee, Work: 100 * time.Microsecond, Limit: 30 * time.Second, Trace: path})
	if err != nil {
		t.Fatal(err)
	}
	cc, err := grpc.NewClient("passthrough:///"+b.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Stop()
		t.Fatal(err)
	}
	const calls = 5
	for range calls {
		if err := cc.Invoke(ctx, Method, wrapperspb.String("x"), new(wrapperspb.StringValue)); err != nil {
			t.Errorf("call: %v", err)
		}
	}
	cc.Close()
	time.Sleep(100 * time.Millisecond) // a few samples after the calls
	rep, err := b.Stop()
	if err != nil {
		t.Fatal(err)
	}
	if rep.TraceErr != "" {
		t.Errorf("TraceErr = %q, want none", rep.TraceErr)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []backend.TraceLine
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l backend.TraceLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatalf("line %q: %v", sc.Text(), err)
		}
		lines = append(lines, l)
	}
	if len(lines) < 2 {
		t.Fatalf("%d trace lines, want a line every 20 ms", len(lines))
	}
	last := lines[len(lines)-1]
	var admitted uint64
	for _, n := range last.Snapshot.Admitted {
		admitted += n
	}
	if admitted != calls || !(last.At > lines[0].At) || !(last.CPU > 0) {
		t.Errorf("last line: admitted %d at %.3f s (first %.3f s), cpu %.3f s; want the %d calls, later times, the process's CPU", admitted, last.At, lines[0].At, last.CPU, calls)
	}
}
