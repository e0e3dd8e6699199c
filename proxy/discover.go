package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Resolver looks up backends' addresses. *net.Resolver implements it.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
	LookupSRV(ctx context.Context, service, proto, name string) (cname string, addrs []*net.SRV, err error)
}

// errNoAddresses is a resolution that found nothing.
var errNoAddresses = errors.New("no addresses")

// resolve returns the backends d names, as sorted, distinct ip:port
// strings: the address records of host for "ip", "ip4" and "ip6", or each
// SRV record's target resolved to its addresses, with the record's port.
// SRV priorities and weights are not used: every target is a backend, and
// the balancer weighs them by their load.
func resolve(ctx context.Context, r Resolver, d DNS) ([]string, error) {
	var out []string
	switch d.Type {
	case "srv":
		_, srvs, err := r.LookupSRV(ctx, "", "", d.Name)
		if err != nil {
			return nil, err
		}
		for _, s := range srvs {
			ips, err := r.LookupNetIP(ctx, "ip", strings.TrimSuffix(s.Target, "."))
			if err != nil {
				continue // one dead target does not void the others
			}
			out = appendAddrs(out, ips, s.Port)
		}
	default:
		host, port, err := net.SplitHostPort(d.Name)
		if err != nil {
			return nil, err
		}
		p, err := strconv.ParseUint(port, 10, 16)
		if err != nil {
			return nil, fmt.Errorf("port %q: %w", port, err)
		}
		ips, err := r.LookupNetIP(ctx, d.Type, host)
		if err != nil {
			return nil, err
		}
		out = appendAddrs(out, ips, uint16(p))
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil, errNoAddresses
	}
	return out, nil
}

func appendAddrs(out []string, ips []netip.Addr, port uint16) []string {
	for _, ip := range ips {
		out = append(out, netip.AddrPortFrom(ip.Unmap(), port).String())
	}
	return out
}

// refresh resolves backends.dns once and, when it found backends, makes
// them the set. A failure or an empty answer keeps the set in force: a
// DNS outage must not empty the pool. It reports whether it resolved.
func (h *Handler) refresh(ctx context.Context, now time.Time, initial bool) bool {
	d := h.settings.Load().cfg.Backends.DNS
	if d.Name == "" {
		return false
	}
	rctx, cancel := context.WithTimeout(ctx, d.Timeout)
	defer cancel()
	addrs, err := resolve(rctx, h.resolver, d)
	if err != nil {
		h.log.Warn("proxy: resolving backends failed; keeping the current set", "name", d.Name, "type", d.Type,
			"err", err, "backends", len(*h.bal.set.Load()))
		return false
	}
	h.setBackends(addrs, now, initial)
	return true
}

// runDNS re-resolves backends.dns every dns.every (and at once when a
// reload changes it) until ctx ends. A set resolved for the first time
// here (New found nothing) is taken without slow start.
func (h *Handler) runDNS(ctx context.Context) {
	initial := len(*h.bal.set.Load()) == 0
	for {
		every := h.settings.Load().cfg.Backends.DNS.Every
		t := time.NewTimer(every)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-h.resolved:
			t.Stop()
		}
		if h.refresh(ctx, h.now(), initial) {
			initial = false
		}
	}
}
