//go:build realtime

package proxylab

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

// The real-time checks of issue 19, on loopback. Short by default so that
// they can run on a busy machine; the figures of record come from a quiet
// machine with the durations of bench/README.md.
var (
	cascadeFor  = flag.Duration("proxylab.duration", 20*time.Second, "length of each cascade run")
	overheadFor = flag.Duration("proxylab.overhead", 3*time.Second, "length of each overhead measurement")
	rounds      = flag.Int("proxylab.rounds", 3, "overhead rounds (the proxies' order rotates)")
	rate        = flag.Float64("proxylab.rate", 1500, "overhead: offered rate, requests/s")
	out         = flag.String("proxylab.out", "", "append the results as markdown tables to this file")
)

func TestMain(m *testing.M) {
	if Hijack() {
		return
	}
	flag.Parse()
	os.Exit(m.Run())
}

func appendOut(t *testing.T, text string) {
	if *out == "" {
		return
	}
	f, err := os.OpenFile(*out, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, text)
}

// TestProxyCascade: 3 fixed-capacity backends, 1.2× their capacity from
// naive retrying clients, through the classic balancer and through levee.
func TestProxyCascade(t *testing.T) {
	var b strings.Builder
	fmt.Fprintf(&b, "| proxy | goodput ÷ capacity | CRITICAL ok | SHEDDABLE ok | ejections | most out at once | shares | p50 | p99 |\n|---|---:|---:|---:|---:|---:|---|---:|---:|\n")
	for _, kind := range []string{RoleClassic, RoleLevee} {
		r, err := Cascade(context.Background(), CascadeConfig{Proxy: kind, Duration: *cascadeFor})
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "| %s | %.3f | %.4f | %.4f | %d | %d | %.2f | %.0f ms | %.0f ms |\n", kind, r.GoodputRatio,
			r.CriticalSuccess, r.SheddableSuccess, r.Ejections, r.MaxOut, r.Shares, r.P50*1e3, r.P99*1e3)
		if kind != RoleLevee {
			continue
		}
		if l := r.Last; l != nil {
			for _, b := range l.Backends {
				t.Logf("levee backend %s: %s limit %d capacity %d baseline %.1f ms outcomes %v", b.Address, b.State, b.Limit, b.Capacity, b.BaselineMs, b.Outcomes)
			}
			for _, rt := range l.Routes {
				t.Logf("levee route %s: statuses %v edge shed %d answers %v retries %d", rt.Route, rt.Statuses, rt.EdgeShed, rt.Answers, rt.Retries)
			}
		}
		if r.GoodputRatio < 0.85 || r.CriticalSuccess < 0.99 || r.Ejections != 0 {
			t.Errorf("levee: goodput %.3f (want ≥ 0.85), CRITICAL %.4f (want ≥ 0.99), ejections %d (want 0)",
				r.GoodputRatio, r.CriticalSuccess, r.Ejections)
		}
		for i, s := range r.Shares {
			if s < 0.2 {
				t.Errorf("levee: backend %d served %.2f of the requests, want all in rotation", i, s)
			}
		}
	}
	t.Log("\n" + b.String())
	appendOut(t, "### Failover cascade ("+cascadeFor.String()+" per proxy)\n\n"+b.String())
}

// TestProxyFailover: one backend killed a third into the run and restarted
// at two thirds, under levee.
func TestProxyFailover(t *testing.T) {
	d := *cascadeFor
	r, err := Cascade(context.Background(), CascadeConfig{Proxy: RoleLevee, Duration: d, Load: 0.6, Kill: d / 3, Revive: 2 * d / 3})
	if err != nil {
		t.Fatal(err)
	}
	text := fmt.Sprintf("| ejected after the kill | attempts sent to it after its ejection | back in rotation after its restart | served per second after the restart | CRITICAL ok |\n|---:|---:|---:|---|---:|\n| %v | %d | %v | %v | %.4f |\n",
		r.EjectedAfter, r.SentAfterEjection, r.ReturnedAfter, r.RampPerSecond, r.CriticalSuccess)
	t.Log("\n" + text)
	appendOut(t, "### One backend killed and restarted under levee (0.6× capacity, "+d.String()+")\n\n"+text)
	if r.EjectedAfter < 0 || r.EjectedAfter > 2*time.Second {
		t.Errorf("ejected %v after the kill, want within 2s", r.EjectedAfter)
	}
	if r.SentAfterEjection != 0 {
		t.Errorf("%d attempts sent to the killed backend after its ejection, want 0", r.SentAfterEjection)
	}
	if len(r.RampPerSecond) < 6 || r.RampPerSecond[1] >= r.RampPerSecond[len(r.RampPerSecond)-2] {
		t.Errorf("served per second after the restart %v: want a ramp", r.RampPerSecond)
	}
}

// TestProxyOverhead: CPU per request and latency of a bare ReverseProxy,
// levee and nginx below saturation, side by side.
//
// A run in which any proxy failed or refused a request did not measure
// what it was meant to (a stall of the shared machine: the CPU figures
// are not comparable) and is measured again, up to overheadTries runs; a
// proxy that still fails in every run fails the test. Each ratio's bound
// is widened by the round-to-round spread of its reference in the same
// run: a short run cannot resolve a difference finer than that.
func TestProxyOverhead(t *testing.T) {
	_, err := os.Stat(NginxPath)
	nginx := err == nil
	if !nginx {
		t.Log("nginx is not installed (apt-get install -y nginx): measuring without it")
	}
	var rows []OverheadRow
	for try := 1; ; try++ {
		rows, err = Overhead(context.Background(), OverheadConfig{Rate: *rate, Duration: *overheadFor, Rounds: *rounds, Nginx: nginx})
		if err != nil {
			t.Fatal(err)
		}
		failed := overheadFailures(rows)
		if failed == "" {
			break
		}
		if try == overheadTries {
			med, _ := overheadMedians(rows)
			t.Log("\n" + overheadTable(rows, med, nginx))
			t.Fatalf("%s below saturation in each of %d runs: the CPU figures are not comparable", failed, try)
		}
		t.Logf("run %d: %s below saturation (the machine is not quiet, or the rate too high); measuring again", try, failed)
	}
	med, spread := overheadMedians(rows)
	table := overheadTable(rows, med, nginx)
	t.Log("\n" + table)
	appendOut(t, fmt.Sprintf("### Overhead below saturation (%.0f/s, %v × %d rounds)\n\n%s\n", *rate, *overheadFor, *rounds, table))
	// The criterion is 1.1× a bare ReverseProxy (the bare rounds' spread
	// was 5% in bench/proxy.sh's 20 s rounds of 2026-12-02).
	lb := float64(med[RoleLevee]) / float64(med[RoleBare])
	if limit := 1.1 + spread[RoleBare]; lb > limit {
		t.Errorf("levee uses %.2f× the CPU per request of a bare ReverseProxy, want ≤ 1.1 (+ the bare rounds' spread: ≤ %.2f)", lb, limit)
	}
	// And 3× nginx (levee ÷ nginx 2.55–3.08 in the CI runs of 2026-12-02,
	// nginx's rounds spreading up to 8%).
	if nginx {
		if ln, limit := float64(med[RoleLevee])/float64(med["nginx"]), 3*(1+spread["nginx"]); ln > limit {
			t.Errorf("levee uses %.2f× nginx's CPU per request, want ≤ 3 (× 1 + nginx's rounds' spread: ≤ %.2f)", ln, limit)
		}
	}
}

// overheadTries is how many runs TestProxyOverhead measures before it
// gives up on a quiet one.
const overheadTries = 3

// overheadFailures names the proxies that failed or refused requests, ""
// when none did.
func overheadFailures(rows []OverheadRow) string {
	var failed []string
	for _, r := range rows {
		if r.Failed > 0 {
			failed = append(failed, fmt.Sprintf("%s: %d requests failed or were refused", r.Proxy, r.Failed))
		}
	}
	return strings.Join(failed, "; ")
}

// overheadMedians returns each proxy's median CPU per request and the
// spread of its rounds, (max − min) ÷ median.
func overheadMedians(rows []OverheadRow) (map[string]time.Duration, map[string]float64) {
	med, spread := map[string]time.Duration{}, map[string]float64{}
	for _, r := range rows {
		m, lo, hi := report.Median(r.CPUPerRequest)
		med[r.Proxy] = m
		if m > 0 {
			spread[r.Proxy] = float64(hi-lo) / float64(m)
		}
	}
	return med, spread
}

// overheadTable is the run as a markdown table, with the ratios of the
// medians med (overheadMedians).
func overheadTable(rows []OverheadRow, med map[string]time.Duration, nginx bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "| proxy | CPU per request (median of %d) | rounds | p50 | p99 | failed |\n|---|---:|---|---:|---:|---:|\n", *rounds)
	for _, r := range rows {
		p50, _, _ := report.Median(r.P50)
		p99, _, _ := report.Median(r.P99)
		fmt.Fprintf(&b, "| %s | %.1f µs | %v | %.2f ms | %.2f ms | %d |\n", r.Proxy, float64(med[r.Proxy])/1e3,
			r.CPUPerRequest, p50*1e3, p99*1e3, r.Failed)
	}
	fmt.Fprintf(&b, "\nlevee ÷ bare ReverseProxy: %.2f", float64(med[RoleLevee])/float64(med[RoleBare]))
	if nginx {
		fmt.Fprintf(&b, "; levee ÷ nginx: %.2f", float64(med[RoleLevee])/float64(med["nginx"]))
	}
	return b.String()
}
