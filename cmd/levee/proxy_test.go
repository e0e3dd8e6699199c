package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestProxyConfigErrors: a broken file is refused with every problem
// named by file, line and field, exit status 1, nothing served.
func TestProxyConfigErrors(t *testing.T) {
	path := filepath.Join(t.TempDir(), "proxy.yaml")
	data := "version: 1\nproxy:\n  backends:\n    static: [{address: 127.0.0.1}]\n  outlier: {max_ejected_share: 2}\n  balance: {slow_strat: 10s}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := levee(t, "proxy", "--config", path)
	if code != exitFailure || stdout != "" {
		t.Errorf("exit %d, stdout %q; want %d and nothing", code, stdout, exitFailure)
	}
	for _, want := range []string{
		path + ":4:", `proxy.backends.static[0].address: must be host:port, got "127.0.0.1"`,
		path + ":5:", "proxy.outlier.max_ejected_share: must be in [0, 1], got 2",
		path + ":6:", `proxy.balance.slow_strat: unknown field "slow_strat" (did you mean "slow_start"?)`,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}

// TestProxyCommand runs levee proxy in-process on loopback: it proxies,
// serves its probes, status and metrics outside admission, and drains and
// exits 0 when interrupted.
func TestProxyCommand(t *testing.T) {
	if testing.Short() {
		t.Skip("loopback")
	}
	back := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "crit="+r.Header.Get("Levee-Criticality"))
	}))
	defer back.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	path := filepath.Join(t.TempDir(), "proxy.yaml")
	data := "version: 1\nhttp:\n  routes: [{name: batch, path: /batch/, criticality: SHEDDABLE}]\nproxy:\n  listen: " + addr +
		"\n  backends: {static: [{address: " + strings.TrimPrefix(back.URL, "http://") + "}]}\n  drain: {delay: 100ms, timeout: 1s}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncBuffer
	var code int
	var wg sync.WaitGroup
	wg.Go(func() { code = runCtx(ctx, []string{"proxy", "-c", path, "--log-format", "json"}, &stdout, &stderr) })
	get := func(p string) (int, string) {
		for range 100 {
			resp, err := http.Get("http://" + addr + p)
			if err != nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			return resp.StatusCode, string(b)
		}
		return 0, ""
	}
	for _, c := range []struct {
		path, want string
	}{
		{"/batch/job", "crit=SHEDDABLE"},
		{"/x", "crit=CRITICAL"},
		{"/readyz", "ok\n"},
		{"/levee/proxy", `"address"`},
		{"/metrics", "levee_proxy_requests_total"},
	} {
		if code, body := get(c.path); code != 200 || !strings.Contains(body, c.want) {
			t.Errorf("GET %s: %d %q, want 200 with %q", c.path, code, body, c.want)
		}
	}
	cancel()
	wg.Wait()
	if code != exitOK {
		t.Errorf("exit %d after the interrupt, want 0; stderr:\n%s", code, stderr.String())
	}
	for _, want := range []string{`"msg":"levee proxy: draining"`, `"msg":"levee proxy: stopped"`} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %s:\n%s", want, stderr.String())
		}
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes and reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
