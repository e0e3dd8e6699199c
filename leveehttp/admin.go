package leveehttp

import (
	"bytes"
	"crypto/subtle"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/degrade"
)

// ShedForcer forces a shed level for drills. *admit.Controller implements
// it (admit.Controller.ForceShed).
type ShedForcer interface {
	// ForceShed forces the shed level (0..4, as admit.Snapshot.ShedLevel)
	// until the time until; level ≤ 0 or a zero until ends the drill.
	ForceShed(level float64, until time.Time)
	// ForcedShed reports the drill in force at now.
	ForcedShed(now time.Time) (level float64, until time.Time, ok bool)
}

// AdminOption configures NewAdmin.
type AdminOption func(*Admin)

// WithAdminDegrade lets the endpoint force degradation levels on d (POST
// /drill with degrade_level). Without it such drills answer 501.
func WithAdminDegrade(d *degrade.Controller) AdminOption {
	return func(a *Admin) { a.deg = d }
}

// WithAdminShed lets the endpoint force shed levels on s (POST /drill with
// shed_level). Without it such drills answer 501.
func WithAdminShed(s ShedForcer) AdminOption {
	return func(a *Admin) { a.shed = s }
}

// WithAdminLogger sets the logger every change made through the endpoint
// is logged to, with the caller's address and identity. Default
// slog.Default().
func WithAdminLogger(l *slog.Logger) AdminOption {
	return func(a *Admin) {
		if l != nil {
			a.log = l
		}
	}
}

// maxAdminBody bounds request bodies.
const maxAdminBody = 64 << 10

// Admin is levee's admin endpoint, an http.Handler serving a JSON API
// under the prefix admin.path (default /levee/admin) of the configuration
// its Reloader holds:
//
//	GET    /config     the effective configuration, secrets redacted
//	POST   /reload     read the file again; apply it whole or reject it whole
//	GET    /dry-run    {"enabled": …, "override": …}
//	PUT    /dry-run    {"enabled": true}: switch dry-run (an override that survives reloads)
//	DELETE /dry-run    drop the override: the file and environment decide again
//	GET    /drill      the forced levels in force
//	POST   /drill      {"degrade_level": 2, "shed_level": 1.5, "duration": "30s"}
//	DELETE /drill      end the drill (?part=degrade or ?part=shed for one part)
//
// Every request must carry admin.token as "Authorization: Bearer …", or
// come over a TLS connection with a client certificate the server
// verified (admin.client_cert; its names restrict which certificates).
// Anything else is answered 401 and changes nothing; with neither
// configured every request is. The endpoint answers 404 while
// admin.enabled is false. The token and the certificate names are read
// from the configuration in force, so a reload rotates them.
//
// A drill needs an expiry: duration is mandatory, between 1s and
// admin.max_drill, and the forced level ends by itself then. A forced
// degradation level reaches new requests at once (the controller's
// tickets carry it to degrade.FromContext) and ends at the first control
// step at or after its expiry. The package documentation of levee's config
// package has curl examples.
//
// Mount it outside admission control (never shed): an operator needs it
// most when the server is overloaded. Safe for concurrent use.
type Admin struct {
	rl     *config.Reloader
	deg    *degrade.Controller
	shed   ShedForcer
	log    *slog.Logger
	prefix string

	unauthorized, changes atomic.Uint64
}

// NewAdmin returns the admin endpoint for rl's configuration, mounted at
// its admin.path (read once: the path needs a restart to change). A nil rl
// panics.
func NewAdmin(rl *config.Reloader, opts ...AdminOption) *Admin {
	if rl == nil {
		panic("leveehttp: NewAdmin with a nil Reloader")
	}
	a := &Admin{rl: rl, log: slog.Default(), prefix: rl.Current().Admin.Path}
	for _, o := range opts {
		if o != nil {
			o(a)
		}
	}
	return a
}

// Prefix returns the path the endpoint serves under.
func (a *Admin) Prefix() string { return a.prefix }

// AdminStats counts the endpoint's use, for metrics.
type AdminStats struct {
	// Unauthorized counts requests refused with 401.
	Unauthorized uint64
	// Changes counts requests that changed something (reload, dry-run,
	// drill).
	Changes uint64
}

// Stats returns the counters.
func (a *Admin) Stats() AdminStats {
	return AdminStats{Unauthorized: a.unauthorized.Load(), Changes: a.changes.Load()}
}

// Counts returns Stats' two counters, for leveeprom.NewConfigCollector.
func (a *Admin) Counts() (unauthorized, changes uint64) {
	s := a.Stats()
	return s.Unauthorized, s.Changes
}

// ServeHTTP implements http.Handler.
func (a *Admin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	cfg := a.rl.Current().Admin
	rest, ok := strings.CutPrefix(r.URL.Path, a.prefix)
	if !cfg.Enabled || !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		writeJSON(w, http.StatusNotFound, errorDoc("not found"))
		return
	}
	who, ok := a.authorize(r, cfg)
	if !ok {
		a.unauthorized.Add(1)
		h.Set("WWW-Authenticate", `Bearer realm="levee-admin"`)
		writeJSON(w, http.StatusUnauthorized, errorDoc("unauthorized"))
		return
	}
	switch strings.TrimSuffix(rest, "/") {
	case "":
		a.index(w, r)
	case "/config":
		a.config(w, r)
	case "/reload":
		a.reload(w, r, who)
	case "/dry-run":
		a.dryRun(w, r, who)
	case "/drill":
		a.drill(w, r, who)
	default:
		writeJSON(w, http.StatusNotFound, errorDoc("not found: see GET "+a.prefix+"/"))
	}
}

// authorize checks the bearer token or the client certificate and returns
// who the caller is, for the log.
func (a *Admin) authorize(r *http.Request, cfg config.Admin) (string, bool) {
	if cfg.Token != "" {
		if auth := r.Header.Get("Authorization"); len(auth) > 7 && strings.EqualFold(auth[:7], "bearer ") {
			got := strings.TrimSpace(auth[7:])
			if subtle.ConstantTimeCompare([]byte(got), []byte(cfg.Token)) == 1 {
				return "token", true
			}
		}
	}
	if cfg.ClientCert.Enabled && r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert := r.TLS.VerifiedChains[0][0]
		if len(cfg.ClientCert.Names) == 0 {
			return "cert:" + cert.Subject.CommonName, true
		}
		for _, n := range certNames(cert) {
			for _, want := range cfg.ClientCert.Names {
				if n == want {
					return "cert:" + n, true
				}
			}
		}
	}
	return "", false
}

// certNames lists a certificate's names: subject common name, DNS and URI
// subject alternative names.
func certNames(c *x509.Certificate) []string {
	names := make([]string, 0, 1+len(c.DNSNames)+len(c.URIs))
	if c.Subject.CommonName != "" {
		names = append(names, c.Subject.CommonName)
	}
	names = append(names, c.DNSNames...)
	for _, u := range c.URIs {
		names = append(names, u.String())
	}
	return names
}

func (a *Admin) index(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"endpoints": []string{
			"GET " + a.prefix + "/config",
			"POST " + a.prefix + "/reload",
			"GET|PUT|DELETE " + a.prefix + "/dry-run",
			"GET|POST|DELETE " + a.prefix + "/drill",
		},
	})
}

func (a *Admin) config(w http.ResponseWriter, r *http.Request) {
	if !allow(w, r, http.MethodGet) {
		return
	}
	st := a.rl.State()
	doc := struct {
		Generation uint64            `json:"generation"`
		Source     string            `json:"source"`
		Hash       string            `json:"hash"`
		AppliedAt  time.Time         `json:"applied_at"`
		Overrides  map[string]string `json:"overrides"`
		Config     json.RawMessage   `json:"config"`
		LastReload *reloadDoc        `json:"last_reload,omitempty"`
	}{
		Generation: st.Generation,
		Source:     st.Source,
		Hash:       st.Hash,
		AppliedAt:  st.AppliedAt.UTC(),
		Overrides:  a.rl.Overrides(),
		Config:     st.Config.JSON(),
	}
	if res, ok := a.rl.Last(); ok {
		d := toReloadDoc(res)
		doc.LastReload = &d
	}
	writeJSON(w, http.StatusOK, doc)
}

// reloadDoc is a config.Result in JSON.
type reloadDoc struct {
	At         time.Time        `json:"at"`
	Reason     string           `json:"reason"`
	OK         bool             `json:"ok"`
	Applied    bool             `json:"applied"`
	Generation uint64           `json:"generation"`
	Changes    []config.Change  `json:"changes"`
	Error      string           `json:"error,omitempty"`
	Errors     []config.Problem `json:"errors,omitempty"`
}

func toReloadDoc(res config.Result) reloadDoc {
	d := reloadDoc{At: res.At.UTC(), Reason: res.Reason, OK: res.Err == nil, Applied: res.Applied, Generation: res.Generation, Changes: res.Changes}
	if d.Changes == nil {
		d.Changes = []config.Change{}
	}
	if res.Err != nil {
		d.Error = res.Err.Error()
		var ce *config.Error
		if errors.As(res.Err, &ce) {
			d.Errors = ce.Problems
		}
	}
	return d
}

// resultStatus is the status of a reload's answer: 200 applied or
// unchanged, 409 without a file, 422 rejected.
func resultStatus(res config.Result) int {
	switch {
	case res.Err == nil:
		return http.StatusOK
	case errors.Is(res.Err, config.ErrNoFile):
		return http.StatusConflict
	}
	return http.StatusUnprocessableEntity
}

func (a *Admin) reload(w http.ResponseWriter, r *http.Request, who string) {
	if !allow(w, r, http.MethodPost) {
		return
	}
	res := a.rl.ReloadFor("admin")
	a.logChange(r, who, "reload", "applied", res.Applied, "generation", res.Generation, "ok", res.Err == nil)
	writeJSON(w, resultStatus(res), toReloadDoc(res))
}

const dryRunField = "admit.dry_run"

func (a *Admin) dryRun(w http.ResponseWriter, r *http.Request, who string) {
	if !allow(w, r, http.MethodGet, http.MethodPut, http.MethodDelete) {
		return
	}
	type doc struct {
		Enabled  bool             `json:"enabled"`
		Override bool             `json:"override"`
		Changes  []config.Change  `json:"changes,omitempty"`
		Error    string           `json:"error,omitempty"`
		Errors   []config.Problem `json:"errors,omitempty"`
	}
	state := func(res *config.Result) (int, doc) {
		_, over := a.rl.Overrides()[dryRunField]
		d := doc{Enabled: a.rl.Current().Admit.DryRun, Override: over}
		if res == nil {
			return http.StatusOK, d
		}
		rd := toReloadDoc(*res)
		d.Changes, d.Error, d.Errors = rd.Changes, rd.Error, rd.Errors
		return resultStatus(*res), d
	}
	var res config.Result
	switch r.Method {
	case http.MethodGet:
		status, d := state(nil)
		writeJSON(w, status, d)
		return
	case http.MethodPut:
		var body struct {
			Enabled *bool `json:"enabled"`
		}
		if !readJSON(w, r, &body) {
			return
		}
		if body.Enabled == nil {
			writeJSON(w, http.StatusBadRequest, errorDoc(`body must be {"enabled": true} or {"enabled": false}`))
			return
		}
		res = a.rl.SetOverride(dryRunField, strconv.FormatBool(*body.Enabled))
	case http.MethodDelete:
		res = a.rl.ClearOverride(dryRunField)
	}
	status, d := state(&res)
	a.logChange(r, who, "dry-run", "method", r.Method, "enabled", d.Enabled, "ok", res.Err == nil)
	writeJSON(w, status, d)
}

// drillPart is one forced level in the drill document.
type drillPart struct {
	Level      float64   `json:"level"`
	Until      time.Time `json:"until"`
	RemainingS float64   `json:"remaining_s"`
}

type drillDoc struct {
	Degrade       *drillPart `json:"degrade"`
	Shed          *drillPart `json:"shed"`
	DegradeMax    int        `json:"degrade_max"`
	ShedSupported bool       `json:"shed_supported"`
}

func (a *Admin) drillState(now time.Time) drillDoc {
	d := drillDoc{ShedSupported: a.shed != nil}
	part := func(l float64, until time.Time) *drillPart {
		return &drillPart{Level: l, Until: until.UTC(), RemainingS: math.Max(0, until.Sub(now).Seconds())}
	}
	if a.deg != nil {
		d.DegradeMax = int(a.deg.Max())
		if l, until, ok := a.deg.Forced(now); ok {
			d.Degrade = part(float64(l), until)
		}
	}
	if a.shed != nil {
		if l, until, ok := a.shed.ForcedShed(now); ok {
			d.Shed = part(l, until)
		}
	}
	return d
}

func (a *Admin) drill(w http.ResponseWriter, r *http.Request, who string) {
	if !allow(w, r, http.MethodGet, http.MethodPost, http.MethodDelete) {
		return
	}
	switch r.Method {
	case http.MethodGet:
		writeJSON(w, http.StatusOK, a.drillState(time.Now()))
	case http.MethodDelete:
		part := r.URL.Query().Get("part")
		if part != "" && part != "degrade" && part != "shed" {
			writeJSON(w, http.StatusBadRequest, errorDoc(`part must be "degrade" or "shed"`))
			return
		}
		if (part == "" || part == "degrade") && a.deg != nil {
			a.deg.Force(0, time.Time{})
		}
		if (part == "" || part == "shed") && a.shed != nil {
			a.shed.ForceShed(0, time.Time{})
		}
		a.logChange(r, who, "drill end", "part", part)
		writeJSON(w, http.StatusOK, a.drillState(time.Now()))
	case http.MethodPost:
		var body struct {
			DegradeLevel *int     `json:"degrade_level"`
			ShedLevel    *float64 `json:"shed_level"`
			Duration     string   `json:"duration"`
		}
		if !readJSON(w, r, &body) {
			return
		}
		maxDrill := a.rl.Current().Admin.MaxDrill
		d, err := time.ParseDuration(body.Duration)
		switch {
		case body.Duration == "":
			writeJSON(w, http.StatusBadRequest, errorDoc(`duration is mandatory: a drill must end by itself (e.g. "30s")`))
			return
		case err != nil:
			writeJSON(w, http.StatusBadRequest, errorDoc(fmt.Sprintf("duration %q: not a duration such as \"30s\"", body.Duration)))
			return
		case d < time.Second || d > maxDrill:
			writeJSON(w, http.StatusBadRequest, errorDoc(fmt.Sprintf("duration %v: must be in [1s, %v] (admin.max_drill)", d, maxDrill)))
			return
		case body.DegradeLevel == nil && body.ShedLevel == nil:
			writeJSON(w, http.StatusBadRequest, errorDoc("give degrade_level, shed_level or both"))
			return
		}
		if body.DegradeLevel != nil {
			if a.deg == nil {
				writeJSON(w, http.StatusNotImplemented, errorDoc("this endpoint has no degradation controller"))
				return
			}
			if m := int(a.deg.Max()); *body.DegradeLevel < 0 || *body.DegradeLevel > m {
				writeJSON(w, http.StatusBadRequest, errorDoc(fmt.Sprintf("degrade_level %d: must be in [0, %d]", *body.DegradeLevel, m)))
				return
			}
		}
		if body.ShedLevel != nil {
			if a.shed == nil {
				writeJSON(w, http.StatusNotImplemented, errorDoc("this controller cannot force a shed level"))
				return
			}
			if l := *body.ShedLevel; !(l >= 0 && l <= 4) {
				writeJSON(w, http.StatusBadRequest, errorDoc(fmt.Sprintf("shed_level %v: must be in [0, 4]", l)))
				return
			}
		}
		now := time.Now()
		until := now.Add(d)
		if body.DegradeLevel != nil {
			a.deg.Force(degrade.Level(*body.DegradeLevel), until)
		}
		if body.ShedLevel != nil {
			a.shed.ForceShed(*body.ShedLevel, until)
		}
		args := []any{"duration", d.String(), "until", until.UTC()}
		if body.DegradeLevel != nil {
			args = append(args, "degrade_level", *body.DegradeLevel)
		}
		if body.ShedLevel != nil {
			args = append(args, "shed_level", *body.ShedLevel)
		}
		a.logChange(r, who, "drill start", args...)
		writeJSON(w, http.StatusOK, a.drillState(now))
	}
}

// logChange logs a change made through the endpoint and counts it.
func (a *Admin) logChange(r *http.Request, who, action string, args ...any) {
	a.changes.Add(1)
	a.log.Warn("admin: "+action, append([]any{"remote", r.RemoteAddr, "auth", who}, args...)...)
}

// allow answers 405 unless r's method is one of methods.
func allow(w http.ResponseWriter, r *http.Request, methods ...string) bool {
	for _, m := range methods {
		if r.Method == m {
			return true
		}
	}
	w.Header().Set("Allow", strings.Join(methods, ", "))
	writeJSON(w, http.StatusMethodNotAllowed, errorDoc("method not allowed: use "+strings.Join(methods, ", ")))
	return false
}

// readJSON decodes one JSON object of at most maxAdminBody bytes into v,
// refusing unknown fields and trailing data; it answers 400 and returns
// false when it cannot.
func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxAdminBody))
	if err != nil {
		writeJSON(w, http.StatusBadRequest, errorDoc(fmt.Sprintf("body: larger than %d bytes or unreadable", maxAdminBody)))
		return false
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeJSON(w, http.StatusBadRequest, errorDoc("body: "+err.Error()))
		return false
	}
	if dec.More() {
		writeJSON(w, http.StatusBadRequest, errorDoc("body: one JSON object expected"))
		return false
	}
	return true
}

func errorDoc(msg string) map[string]string { return map[string]string{"error": msg} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encoding failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}
