package leveehttp_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"

	"github.com/levee-dev/levee/leveehttp"
)

// One call protects a service: signals, admission controller and
// configuration (LEVEE_* variables, or WithConfigFile) start with it, the
// status page (/levee/status) and the metrics (/metrics) are served
// outside admission control, every request is stamped when it arrives,
// and Close stops it all.
func ExampleProtect() {
	ctx := context.Background()
	mux := http.NewServeMux()
	mux.HandleFunc("GET /hello/{name}", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s\n", r.PathValue("name"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0") // ":8080" in production
	if err != nil {
		log.Fatal(err)
	}

	p, err := leveehttp.Protect(ctx, mux)
	if err != nil {
		log.Fatal(err)
	}
	defer p.Close()
	go p.Serve(ln)

	for _, path := range []string{"/hello/levee", "/levee/status.json", "/metrics"} {
		resp, err := http.Get("http://" + ln.Addr().String() + path)
		if err != nil {
			log.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if path == "/hello/levee" {
			fmt.Print(string(body))
		}
		fmt.Println(path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	// Output:
	// hello, levee
	// /hello/levee 200 text/plain; charset=utf-8
	// /levee/status.json 200 application/json
	// /metrics 200 text/plain; version=0.0.4; charset=utf-8; escaping=underscores
}
