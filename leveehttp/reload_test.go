package leveehttp

import (
	"context"
	"fmt"
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

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/pressure"
)

// reloadVariant is a valid configuration that differs from its neighbours
// in the signal targets, degradation parameters, trusted networks, health
// paths and route rules.
func reloadVariant(i int) string {
	return fmt.Sprintf(`version: 1
reload: {poll: 0s}
admin: {enabled: true, token: %s}
signals:
  cpu: {target: %.2f}
  queue_delay: {target: %dms}
degrade: {target: %.2f, max: %d}
http:
  health_paths: [/healthz, /h%d]
  trusted_networks: [10.%d.0.0/16]
  routes:
    - {name: r%d, path: /api/, criticality: SHEDDABLE_PLUS}
`, adminToken, 0.5+float64(i%40)/100, 5+i%7, 0.6+float64(i%30)/100, 2+i%4, i, i%250, i)
}

// TestReloadUnderLoad serves loopback requests while the file is rewritten
// and reloaded forty times (through the admin endpoint and directly), a
// few of them invalid: every request succeeds, every valid file is
// applied, every invalid one is rejected with the previous config kept.
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "levee.yaml")
	if err := os.WriteFile(path, []byte(reloadVariant(0)), 0o600); err != nil {
		t.Fatal(err)
	}
	rl, err := config.Open(path, config.WithEnv(nil), config.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	deg := degrade.New(rl.Current().Degrade.Options()...)
	set := &pressure.Set{Queue: pressure.NewQueueDelay()}
	ctl := admit.New(admit.WithDegrade(deg), admit.WithSignals(set.Signals()...))
	router := config.NewRouter(rl.Current())
	if err := rl.Subscribe(router, config.ApplyDegrade(deg), config.ApplySignals(set)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go ctl.Run(ctx)

	app := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if router.Classify(r).Route == "" && strings.HasPrefix(r.URL.Path, "/api/") {
			http.Error(w, "no route", http.StatusInternalServerError)
			return
		}
		io.WriteString(w, "ok")
	})
	top := http.NewServeMux()
	admin := NewAdmin(rl, WithAdminDegrade(deg), WithAdminLogger(slog.New(slog.DiscardHandler)))
	top.Handle(admin.Prefix()+"/", admin)
	top.Handle("/", NewHandler(app, ctl, WithTrust(router.Trusted), WithQueueDelay(set.Queue)))
	srv := httptest.NewServer(top)
	defer srv.Close()

	// Each worker sends at least minPerWorker requests and goes on until
	// the reloads are over, up to maxPerWorker.
	const workers, minPerWorker, maxPerWorker, reloads = 4, 100, 5000, 40
	var failed, served atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	done, stop := make(chan struct{}), make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			client := srv.Client()
			for i := range maxPerWorker {
				if i >= minPerWorker {
					select {
					case <-stop:
						return
					default:
					}
				}
				p := "/api/item"
				if i%5 == 0 {
					p = "/healthz"
				}
				resp, err := client.Get(srv.URL + p)
				if err != nil {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
					continue
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK || string(body) != "ok" {
					failed.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("worker %d: %d %q", w, resp.StatusCode, body))
					continue
				}
				served.Add(1)
			}
		})
	}
	go func() { wg.Wait(); close(done) }()

	var invalid, applied, during int
	for i := 1; i <= reloads; i++ {
		// A few requests between reloads.
		for served.Load()+failed.Load() < int64(i*workers*10) {
			select {
			case <-done:
			case <-time.After(time.Millisecond):
				continue
			}
			break
		}
		select {
		case <-done:
		default:
			during++
		}
		content := reloadVariant(i)
		bad := i%10 == 5
		if bad {
			content = strings.Replace(content, "cpu: {target:", "cpu: {tagret:", 1)
			invalid++
		}
		if err := os.WriteFile(path+".tmp", []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
		var ok bool
		if i%2 == 0 {
			req, _ := http.NewRequest("POST", srv.URL+admin.Prefix()+"/reload", nil)
			req.Header.Set("Authorization", "Bearer "+adminToken)
			resp, err := srv.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			ok = resp.StatusCode == http.StatusOK
		} else {
			res := rl.Reload()
			ok = res.Applied
		}
		if ok == bad {
			t.Errorf("reload %d (valid %v): applied %v", i, !bad, ok)
		}
		if ok {
			applied++
		}
		if bad && rl.Current().HTTP.Routes[0].Name != fmt.Sprintf("r%d", i-1) {
			t.Errorf("reload %d: the config in force is not the previous one after a rejection", i)
		}
	}
	close(stop)
	<-done
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of %d requests failed during reloads; first: %v", n, served.Load()+n, firstErr.Load())
	}
	if got, want := rl.Stats().Applied, uint64(applied); got != want || applied != reloads-invalid {
		t.Errorf("applied %d reloads (stats %d), want %d", applied, got, reloads-invalid)
	}
	if got := rl.Current().HTTP.Routes[0].Name; got != fmt.Sprintf("r%d", reloads) {
		t.Errorf("route in force at the end = %q, want r%d", got, reloads)
	}
	if during < reloads {
		t.Errorf("only %d of %d reloads happened while requests were being served", during, reloads)
	}
	t.Logf("%d requests served; %d reloads (%d rejected), %d of them while requests were in flight", served.Load(), reloads, invalid, during)
}
