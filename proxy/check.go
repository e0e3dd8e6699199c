package proxy

import (
	"errors"
	"fmt"
	"math"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"
)

// Check reports every problem of c, each naming its field as the file
// writes it ("backends.static[1].address: …"), joined in one error; nil
// when c is valid. Loading levee's configuration file checks the proxy
// section with the file's positions; Check serves configurations built in
// code.
func (c *Config) Check() error {
	var errs []error
	c.check(func(field, msg string) { errs = append(errs, fmt.Errorf("proxy.%s: %s", field, msg)) })
	return errors.Join(errs...)
}

// reporter receives one problem: the field's path in the section and what
// is wrong with it.
type reporter func(field, msg string)

func (r reporter) rangeInt(field string, x, lo, hi int) {
	if x < lo || x > hi {
		r(field, fmt.Sprintf("must be in [%d, %d], got %d", lo, hi, x))
	}
}

func (r reporter) rangeFloat(field string, x, lo, hi float64, loOpen, hiOpen bool) {
	bad := math.IsNaN(x) || x < lo || x > hi || (loOpen && x == lo) || (hiOpen && x == hi)
	if bad {
		l, h := "[", "]"
		if loOpen {
			l = "("
		}
		if hiOpen {
			h = ")"
		}
		r(field, fmt.Sprintf("must be in %s%g, %g%s, got %g", l, lo, hi, h, x))
	}
}

func (r reporter) rangeDur(field string, d, lo, hi time.Duration) {
	if d < lo || d > hi {
		r(field, fmt.Sprintf("must be in [%v, %v], got %v", lo, hi, d))
	}
}

func (r reporter) oneOf(field, v string, allowed ...string) {
	for _, a := range allowed {
		if v == a {
			return
		}
	}
	r(field, fmt.Sprintf("must be one of %s, got %q", strings.Join(allowed, ", "), v))
}

func (r reporter) path(field, p string) {
	if p != "" && !strings.HasPrefix(p, "/") {
		r(field, fmt.Sprintf("must be empty or start with /, got %q", p))
	}
}

// hostPort checks host:port with a numeric port in 1..65535.
func hostPort(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return err
	}
	if host == "" {
		return errors.New("missing host")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return fmt.Errorf("port %q is not a number in 1..65535", port)
	}
	return nil
}

func (c *Config) check(r reporter) {
	if c.Listen != "" {
		if _, _, err := net.SplitHostPort(c.Listen); err != nil {
			r("listen", fmt.Sprintf("must be host:port or :port, got %q", c.Listen))
		}
	}
	c.Backends.check(r)
	r.rangeDur("balance.slow_start", c.Balance.SlowStart, 0, time.Hour)
	r.rangeFloat("balance.slow_start_floor", c.Balance.SlowStartFloor, 0, 1, true, false)
	r.rangeDur("balance.load_decay", c.Balance.LoadDecay, 10*time.Millisecond, time.Hour)
	c.Limit.check(r)
	h := c.Health
	r.path("health.path", h.Path)
	r.rangeDur("health.every", h.Every, 100*time.Millisecond, time.Hour)
	r.rangeFloat("health.jitter", h.Jitter, 0, 1, false, true)
	r.rangeDur("health.timeout", h.Timeout, time.Millisecond, time.Minute)
	r.rangeInt("health.unhealthy", h.Unhealthy, 1, 100)
	r.rangeInt("health.healthy", h.Healthy, 1, 100)
	o := c.Outlier
	r.rangeInt("outlier.consecutive_failures", o.ConsecutiveFailures, 0, 1e6)
	r.rangeDur("outlier.base_ejection", o.BaseEjection, 100*time.Millisecond, time.Hour)
	r.rangeDur("outlier.max_ejection", o.MaxEjection, max(o.BaseEjection, 100*time.Millisecond), 24*time.Hour)
	r.rangeFloat("outlier.max_ejected_share", o.MaxEjectedShare, 0, 1, false, false)
	rt := c.Retry
	r.rangeInt("retry.max_attempts", rt.MaxAttempts, 1, 5)
	r.rangeDur("retry.base", rt.Base, 0, 10*time.Second)
	r.rangeDur("retry.cap", rt.Cap, rt.Base, time.Minute)
	r.rangeFloat("retry.budget_ratio", rt.BudgetRatio, 0, 1, false, false)
	r.rangeDur("retry.budget_window", rt.BudgetWindow, 100*time.Millisecond, time.Hour)
	r.rangeInt("retry.budget_floor", rt.BudgetFloor, 0, 1e6)
	r.rangeInt("retry.buffer_bytes", rt.BufferBytes, 0, 64<<20)
	r.rangeFloat("throttle.k", c.Throttle.K, 1, 100, false, false)
	r.rangeDur("queue.max_wait", c.Queue.MaxWait, 0, time.Minute)
	r.rangeInt("queue.max_waiting", c.Queue.MaxWaiting, 0, 1e6)
	r.oneOf("forward.host", c.Forward.Host, "preserve", "backend")
	r.rangeDur("forward.flush_interval", c.Forward.FlushInterval, -time.Hour, 10*time.Second)
	r.rangeDur("forward.margin", c.Forward.Margin, 0, 10*time.Second)
	r.rangeDur("forward.timeout", c.Forward.Timeout, 0, 24*time.Hour)
	r.rangeDur("drain.delay", c.Drain.Delay, 0, 10*time.Minute)
	r.rangeDur("drain.timeout", c.Drain.Timeout, 0, time.Hour)
	r.path("status_path", c.StatusPath)
}

func (b *Backends) check(r reporter) {
	switch {
	case len(b.Static) == 0 && b.DNS.Name == "":
		r("backends", "give the backends: static (a list of {address: host:port}) or dns.name")
	case len(b.Static) > 0 && b.DNS.Name != "":
		r("backends", "give static or dns.name, not both")
	}
	seen := map[string]int{}
	for i, e := range b.Static {
		f := fmt.Sprintf("backends.static[%d]", i)
		if err := hostPort(e.Address); err != nil {
			r(f+".address", fmt.Sprintf("must be host:port, got %q: %v", e.Address, err))
		} else if j, dup := seen[e.Address]; dup {
			r(f+".address", fmt.Sprintf("%q is listed twice (also backends.static[%d])", e.Address, j))
		} else {
			seen[e.Address] = i
		}
		r.rangeInt(f+".max_conns", e.MaxConns, 0, 1e6)
		r.rangeDur(f+".response_header_timeout", e.ResponseHeaderTimeout, 0, time.Hour)
	}
	d := b.DNS
	r.oneOf("backends.dns.type", d.Type, "ip", "ip4", "ip6", "srv")
	if d.Name != "" {
		if d.Type == "srv" {
			if strings.Contains(d.Name, ":") {
				r("backends.dns.name", fmt.Sprintf("an SRV name has no port (the records give it), got %q", d.Name))
			}
		} else if err := hostPort(d.Name); err != nil {
			r("backends.dns.name", fmt.Sprintf("must be host:port for address records, got %q: %v", d.Name, err))
		}
	}
	r.rangeDur("backends.dns.every", d.Every, 100*time.Millisecond, time.Hour)
	r.rangeDur("backends.dns.timeout", d.Timeout, 10*time.Millisecond, time.Minute)
	r.oneOf("backends.protocol", b.Protocol, "http1", "h2c")
	cn := b.Conn
	r.rangeInt("backends.conn.max_conns", cn.MaxConns, 0, 1e6)
	r.rangeInt("backends.conn.max_idle_conns", cn.MaxIdleConns, 0, 1e6)
	r.rangeDur("backends.conn.dial_timeout", cn.DialTimeout, time.Millisecond, time.Minute)
	r.rangeDur("backends.conn.response_header_timeout", cn.ResponseHeaderTimeout, time.Millisecond, time.Hour)
	r.rangeDur("backends.conn.idle_timeout", cn.IdleTimeout, time.Second, time.Hour)
}

func (l *Limit) check(r reporter) {
	r.rangeInt("limit.max", l.Max, 1, 1e6)
	r.rangeInt("limit.min", l.Min, 1, max(l.Max, 1))
	r.rangeInt("limit.initial", l.Initial, max(l.Min, 1), max(l.Max, 1))
	r.rangeFloat("limit.tolerance", l.Tolerance, 1.05, 10, false, false)
	r.rangeFloat("limit.backoff", l.Backoff, 0.1, 1, false, true)
	r.rangeDur("limit.window", l.Window, 10*time.Millisecond, 10*time.Second)
	if l.ProbeEvery != 0 {
		r.rangeDur("limit.probe_every", l.ProbeEvery, time.Second, time.Hour)
	}
	r.rangeFloat("limit.probe_share", l.ProbeShare, 0, 1, true, true)
}

// restartChanges lists the fields tagged reload:"restart" (by their path
// in the section) whose values differ between a and b.
func restartChanges(a, b *Config) []string {
	var out []string
	var walk func(x, y reflect.Value, path string)
	walk = func(x, y reflect.Value, path string) {
		t := x.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			switch {
			case f.Tag.Get("reload") == "restart":
				if !reflect.DeepEqual(x.Field(i).Interface(), y.Field(i).Interface()) {
					out = append(out, p)
				}
			case f.Type.Kind() == reflect.Struct:
				walk(x.Field(i), y.Field(i), p)
			}
		}
	}
	walk(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "")
	return out
}
