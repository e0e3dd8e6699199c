package backend

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/pressure"
)

// StatusPath is where a Levee backend with LeveeOptions.Status serves
// leveehttp's status page (its JSON with ?format=json), outside admission
// and outside the Stats counters.
const StatusPath = "/levee/status"

// LeveeOptions set up the Levee protection beyond levee's defaults, for
// the labs that need it. The zero value is levee's defaults; the other
// protections ignore it. It travels as JSON to a backend child.
type LeveeOptions struct {
	// Trust lists the networks whose callers are trusted
	// (leveehttp.WithTrust), as prefixes such as "127.0.0.0/8" or
	// "127.0.0.1/32": their Levee-Criticality is honoured in full and their
	// Levee-Tenant and Levee-Attempt are believed. Default none: a caller
	// may not raise its criticality above CRITICAL and its tenant is its
	// /24, so every loopback client of a lab is one tenant.
	Trust []string `json:"trust,omitempty"`
	// Status mounts leveehttp.StatusHandler at StatusPath, in front of
	// admission, sampling once a second.
	Status bool `json:"status,omitempty"`
	// GoroutineCeiling, if above 0, adds pressure's goroutines signal
	// against that ceiling (pressure.WithGoroutineLimit), so that the
	// status JSON carries the live goroutine count as the signal's value ×
	// the ceiling. A ceiling far above any count the lab reaches (1 << 20)
	// never trips and leaves admission as it is.
	GoroutineCeiling int `json:"goroutine_ceiling,omitempty"`
	// ForceOverload adds a signal that always reads twice its target, so
	// that the controller sheds all it may from its first period: the
	// rejection-only phase in which the CPU one rejection costs the whole
	// stack (listener, handler, controller, net/http) is measured.
	ForceOverload bool `json:"force_overload,omitempty"`
}

// trust returns the WithTrust function of o's networks, nil for none, or
// an error naming a malformed prefix.
func (o LeveeOptions) trust() (func(*http.Request) bool, error) {
	if len(o.Trust) == 0 {
		return nil, nil
	}
	nets := make([]netip.Prefix, 0, len(o.Trust))
	for _, s := range o.Trust {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("backend: trusted network %q: %w", s, err)
		}
		nets = append(nets, p.Masked())
	}
	return func(r *http.Request) bool {
		host, _, err := net.SplitHostPort(r.RemoteAddr)
		if err != nil {
			return false
		}
		a, err := netip.ParseAddr(host)
		if err != nil {
			return false
		}
		a = a.Unmap()
		for _, p := range nets {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}, nil
}

// signalOptions returns the options of pressure.Default that o asks for.
func (o LeveeOptions) signalOptions() []pressure.SetOption {
	if o.GoroutineCeiling > 0 {
		return []pressure.SetOption{pressure.WithGoroutineLimit(o.GoroutineCeiling)}
	}
	return nil
}

// mount puts the status page of ctrl in front of h when o asks for it.
func (o LeveeOptions) mount(h http.Handler, ctrl *admit.Controller) http.Handler {
	if !o.Status {
		return h
	}
	st := leveehttp.StatusHandler(ctrl)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == StatusPath {
			st.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// overloaded is a levee.Signal that always reads twice its target.
type overloaded struct{}

func (overloaded) Name() string    { return "forced_overload" }
func (overloaded) Value() float64  { return 2 }
func (overloaded) Target() float64 { return 1 }
