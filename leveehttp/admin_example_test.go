package leveehttp_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
	"github.com/levee-dev/levee/leveehttp"
)

func ExampleNewAdmin() {
	cfg := config.Default()
	cfg.Admin.Enabled = true
	cfg.Admin.Token = "change-me-change-me"
	rl, err := config.NewReloader(cfg, config.WithEnv(nil), config.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		panic(err)
	}
	deg := degrade.New()
	admin := leveehttp.NewAdmin(rl, leveehttp.WithAdminDegrade(deg), leveehttp.WithAdminLogger(slog.New(slog.DiscardHandler)))
	mux := http.NewServeMux()
	mux.Handle(admin.Prefix()+"/", admin) // outside admission control

	do := func(method, path, token, body string) int {
		r := httptest.NewRequest(method, path, strings.NewReader(body))
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		w := httptest.NewRecorder()
		mux.ServeHTTP(w, r)
		return w.Code
	}
	fmt.Println(do("POST", "/levee/admin/drill", "", `{"degrade_level": 2, "duration": "30s"}`), deg.Level())
	fmt.Println(do("POST", "/levee/admin/drill", "change-me-change-me", `{"degrade_level": 2, "duration": "30s"}`), deg.Level())
	fmt.Println(do("PUT", "/levee/admin/dry-run", "change-me-change-me", `{"enabled": true}`), rl.Current().Admit.DryRun)
	// Output:
	// 401 0
	// 200 2
	// 200 true
}
