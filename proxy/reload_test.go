package proxy

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/levee-dev/levee/config"
)

// TestReloadUnderLoad: the backend set and the proxy's parameters are
// reloaded from the file while requests flow; none of them fails, the
// removed backend drains and the added one takes traffic.
func TestReloadUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback")
	}
	var bs [3]*liveBackend
	for i := range bs {
		bs[i] = newLiveBackend(t)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "levee.yaml")
	write := func(share string, addrs ...string) {
		var list []string
		for _, a := range addrs {
			list = append(list, "{address: "+a+"}")
		}
		data := "version: 1\nreload: {poll: 100ms}\nproxy:\n  backends:\n    static: [" + strings.Join(list, ", ") +
			"]\n  outlier: {max_ejected_share: " + share + "}\n  balance: {slow_start: 0s}\n"
		tmp := path + ".tmp"
		if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil { // whole files only
			t.Fatal(err)
		}
	}
	write("0.5", bs[0].addr, bs[1].addr)
	log := slog.New(slog.DiscardHandler)
	rl, err := config.Open(path, WithSection(), config.WithLogger(log), config.WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(FromConfig(rl.Current()), WithLogger(log))
	if err != nil {
		t.Fatal(err)
	}
	if err := rl.Subscribe(h.ConfigTarget()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { rl.Run(ctx) })
	wg.Go(func() { h.Run(ctx) })
	front := httptest.NewServer(h)
	defer front.Close()

	var sent, failed atomic.Int64
	stop := make(chan struct{})
	var load sync.WaitGroup
	for range 8 {
		load.Go(func() {
			c := &http.Client{Timeout: 5 * time.Second}
			for {
				select {
				case <-stop:
					return
				default:
				}
				sent.Add(1)
				resp, err := c.Get(front.URL + "/x")
				if err != nil {
					failed.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					failed.Add(1)
				}
			}
		})
	}
	wait := func(cond func() bool) bool {
		for range 250 {
			if cond() {
				return true
			}
			time.Sleep(20 * time.Millisecond)
		}
		return false
	}
	time.Sleep(200 * time.Millisecond)
	write("0.34", bs[1].addr, bs[2].addr) // bs[0] leaves, bs[2] joins
	if !wait(func() bool { return rl.State().Generation >= 2 }) {
		t.Fatalf("reload not applied: %+v", rl.Stats())
	}
	got2 := bs[2].got.Load()
	if !wait(func() bool { return bs[2].got.Load() > got2+20 }) {
		t.Errorf("the added backend took no traffic")
	}
	was0 := bs[0].got.Load()
	time.Sleep(200 * time.Millisecond)
	close(stop)
	load.Wait()
	if n := bs[0].got.Load() - was0; n > 0 {
		t.Errorf("the removed backend got %d requests after the reload, want 0", n)
	}
	if f := failed.Load(); f > 0 {
		t.Errorf("%d of %d requests failed across the reload, want 0", f, sent.Load())
	}
	if got := h.settings.Load().cfg.Outlier.MaxEjectedShare; got != 0.34 {
		t.Errorf("max_ejected_share %v after the reload, want 0.34", got)
	}
	t.Logf("%d requests across the reload, %d failed", sent.Load(), failed.Load())
	cancel()
	wg.Wait()
}
