package proxy_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/levee-dev/levee/proxy"
)

func ExampleNew() {
	backend := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s caller", r.Header.Get("Levee-Criticality"))
	}))
	defer backend.Close()

	cfg := proxy.DefaultConfig()
	cfg.Backends.Static = []proxy.Endpoint{{Address: strings.TrimPrefix(backend.URL, "http://")}}
	h, err := proxy.New(cfg, proxy.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go h.Run(ctx) // limits, ejections, slow start, health checks

	front := httptest.NewServer(h)
	defer front.Close()
	req, _ := http.NewRequest("GET", front.URL+"/hello", nil)
	req.Header.Set("Levee-Criticality", "CRITICAL_PLUS") // an untrusted caller cannot ask for more than CRITICAL
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	st := h.Status()
	fmt.Println(st.Backends[0].State, st.Backends[0].Outcomes["answered"])
	// Output:
	// 200 hello, CRITICAL caller
	// serving 1
}

func ExampleConfig_Check() {
	cfg := proxy.DefaultConfig()
	cfg.Backends.Static = []proxy.Endpoint{{Address: "10.0.0.1"}}
	cfg.Outlier.MaxEjectedShare = 2
	fmt.Println(cfg.Check())
	// Output:
	// proxy.backends.static[0].address: must be host:port, got "10.0.0.1": address 10.0.0.1: missing port in address
	// proxy.outlier.max_ejected_share: must be in [0, 1], got 2
}
