package wire

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/levee-dev/levee"
)

// Header names in their canonical HTTP form. gRPC metadata uses the same
// names in lower case (the Md* constants).
const (
	Criticality  = "Levee-Criticality"
	Tenant       = "Levee-Tenant"
	TimeoutMs    = "Levee-Timeout-Ms"
	Attempt      = "Levee-Attempt"
	RetryAfterMs = "Levee-Retry-After-Ms"
	Reject       = "Levee-Reject"
	Load         = "Levee-Load"

	// GRPCTimeout is gRPC's own timeout header ("100m", "1S", ...).
	GRPCTimeout = "Grpc-Timeout"
	// EnvoyTimeoutMs is the time budget Envoy tells the upstream it has.
	EnvoyTimeoutMs = "X-Envoy-Expected-Rq-Timeout-Ms"
	// RetryAfter is the standard HTTP header (whole seconds or an HTTP date).
	RetryAfter = "Retry-After"
)

// gRPC metadata keys: the header names in lower case.
const (
	MdCriticality     = "levee-criticality"
	MdTenant          = "levee-tenant"
	MdTimeoutMs       = "levee-timeout-ms"
	MdAttempt         = "levee-attempt"
	MdRetryAfterMs    = "levee-retry-after-ms"
	MdReject          = "levee-reject"
	MdLoad            = "levee-load"
	MdGRPCTimeout     = "grpc-timeout"
	MdEnvoyTimeoutMs  = "x-envoy-expected-rq-timeout-ms"
	MdRetryPushbackMs = "grpc-retry-pushback-ms"
)

// Limits applied by the parsers.
const (
	// MaxTimeout is the largest time budget a header can carry; larger
	// values are clamped to it.
	MaxTimeout = 24 * time.Hour
	// MaxRetryAfter is the largest retry delay a header can carry; larger
	// values are clamped to it.
	MaxRetryAfter = 24 * time.Hour
	// MaxAttempt is the largest attempt number; larger values are clamped.
	MaxAttempt = 9
	// MaxTenantLen is the longest tenant id kept as it is; longer ids (and
	// ids with bytes outside printable ASCII) are replaced by their hash.
	MaxTenantLen = 64
	// MaxLoad is the largest load report; larger values are clamped.
	MaxLoad = 1e6
)

// elements calls f for each comma-separated, space-trimmed, non-empty element
// of vals until f returns false. It does not allocate.
func elements(vals []string, f func(string) bool) {
	for _, v := range vals {
		for len(v) > 0 {
			var e string
			if i := strings.IndexByte(v, ','); i >= 0 {
				e, v = v[:i], v[i+1:]
			} else {
				e, v = v, ""
			}
			e = trimOWS(e)
			if e == "" {
				continue
			}
			if !f(e) {
				return
			}
		}
	}
}

func trimOWS(s string) string {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// parseInt parses an optionally negative decimal integer made of ASCII digits
// only, saturating at ±limit. ok is false for anything else (empty, "+1",
// "1.5", "1e3", "NaN", non-ASCII digits).
func parseInt(s string, limit int64) (n int64, ok bool) {
	neg := false
	if len(s) > 0 && s[0] == '-' {
		neg, s = true, s[1:]
	}
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if n <= limit {
			n = n*10 + int64(c-'0')
		}
	}
	if n > limit {
		n = limit
	}
	if neg {
		n = -n
	}
	return n, true
}

const maxTimeoutMs = int64(MaxTimeout / time.Millisecond)

// ParseTimeoutMs parses Levee-Timeout-Ms or X-Envoy-Expected-Rq-Timeout-Ms
// values: decimal milliseconds. It returns the minimum of the valid elements,
// with every value ≤ 0 returned as 0 (an expired budget) and values above
// MaxTimeout clamped to it. Malformed elements are ignored; with none valid it
// returns 0, false.
func ParseTimeoutMs(vals []string) (time.Duration, bool) {
	best, found := int64(0), false
	elements(vals, func(e string) bool {
		n, ok := parseInt(e, maxTimeoutMs)
		if !ok {
			return true
		}
		if n < 0 {
			n = 0
		}
		if !found || n < best {
			best, found = n, true
		}
		return true
	})
	return time.Duration(best) * time.Millisecond, found
}

// ParseGRPCTimeout parses grpc-timeout values in gRPC's format: 1 to 8 ASCII
// digits followed by a unit, H (hours), M (minutes), S (seconds),
// m (milliseconds), u (microseconds) or n (nanoseconds). It returns the
// minimum of the valid elements, 0 meaning expired, clamped to MaxTimeout.
// Malformed elements are ignored; with none valid it returns 0, false.
func ParseGRPCTimeout(vals []string) (time.Duration, bool) {
	best, found := time.Duration(0), false
	elements(vals, func(e string) bool {
		d, ok := parseGRPCTimeout(e)
		if ok && (!found || d < best) {
			best, found = d, true
		}
		return true
	})
	return best, found
}

func parseGRPCTimeout(e string) (time.Duration, bool) {
	if len(e) < 2 || len(e) > 9 {
		return 0, false
	}
	var unit time.Duration
	switch e[len(e)-1] {
	case 'H':
		unit = time.Hour
	case 'M':
		unit = time.Minute
	case 'S':
		unit = time.Second
	case 'm':
		unit = time.Millisecond
	case 'u':
		unit = time.Microsecond
	case 'n':
		unit = time.Nanosecond
	default:
		return 0, false
	}
	digits := e[:len(e)-1]
	if digits[0] == '-' {
		return 0, false
	}
	n, ok := parseInt(digits, 99999999)
	if !ok {
		return 0, false
	}
	// 99999999 H overflows time.Duration: compare before multiplying.
	if n > int64(MaxTimeout/unit) {
		return MaxTimeout, true
	}
	return time.Duration(n) * unit, true
}

// ParseTimeout combines the three timeout headers: the minimum of every
// valid element of Levee-Timeout-Ms (leveeMs), grpc-timeout (grpcTimeout) and
// X-Envoy-Expected-Rq-Timeout-Ms (envoyMs). 0 with ok == true means the
// budget has expired; ok == false means no valid timeout was sent.
func ParseTimeout(leveeMs, grpcTimeout, envoyMs []string) (time.Duration, bool) {
	d, ok := ParseTimeoutMs(leveeMs)
	if g, gok := ParseGRPCTimeout(grpcTimeout); gok && (!ok || g < d) {
		d, ok = g, true
	}
	if e, eok := ParseTimeoutMs(envoyMs); eok && (!ok || e < d) {
		d, ok = e, true
	}
	return d, ok
}

// AppendTimeoutMs appends d in whole milliseconds, rounded down, as
// Levee-Timeout-Ms carries it; negative d appends "0" and d above MaxTimeout
// appends MaxTimeout.
func AppendTimeoutMs(dst []byte, d time.Duration) []byte {
	d = min(max(d, 0), MaxTimeout)
	return strconv.AppendInt(dst, int64(d/time.Millisecond), 10)
}

// FormatTimeoutMs returns AppendTimeoutMs as a string.
func FormatTimeoutMs(d time.Duration) string {
	var b [24]byte
	return string(AppendTimeoutMs(b[:0], d))
}

// AppendGRPCTimeout appends d in gRPC's timeout format with the finest unit
// that fits in 8 digits, rounding up so the receiver never sees more time
// than d; negative d appends "0n", and d above MaxTimeout appends MaxTimeout.
func AppendGRPCTimeout(dst []byte, d time.Duration) []byte {
	d = min(max(d, 0), MaxTimeout)
	const maxDigits = 99999999
	units := [...]struct {
		d time.Duration
		c byte
	}{{time.Nanosecond, 'n'}, {time.Microsecond, 'u'}, {time.Millisecond, 'm'}, {time.Second, 'S'}, {time.Minute, 'M'}, {time.Hour, 'H'}}
	for _, u := range units {
		n := (d + u.d - 1) / u.d
		if n <= maxDigits {
			dst = strconv.AppendInt(dst, int64(n), 10)
			return append(dst, u.c)
		}
	}
	return append(dst, "24H"...) // unreachable: MaxTimeout fits in minutes
}

// FormatGRPCTimeout returns AppendGRPCTimeout as a string.
func FormatGRPCTimeout(d time.Duration) string {
	var b [16]byte
	return string(AppendGRPCTimeout(b[:0], d))
}

// ParseCriticality parses Levee-Criticality values: the wire names
// CRITICAL_PLUS, CRITICAL, SHEDDABLE_PLUS, SHEDDABLE (ASCII case ignored) or
// the founding text's numbers 4..1 (4 = CRITICAL_PLUS). Of several valid
// elements it returns the least important one, so repeating the header can
// never raise a request. With none valid it returns levee.Critical, false.
func ParseCriticality(vals []string) (levee.Criticality, bool) {
	best, found := levee.Critical, false
	elements(vals, func(e string) bool {
		c, ok := parseCriticality(e)
		if ok && (!found || c.Rank() < best.Rank()) {
			best, found = c, true
		}
		return true
	})
	return best, found
}

func parseCriticality(e string) (levee.Criticality, bool) {
	if len(e) == 1 && e[0] >= '1' && e[0] <= '4' {
		return levee.FromRank(int(e[0] - '1')), true
	}
	for _, c := range levee.Criticalities() {
		if strings.EqualFold(e, c.String()) {
			return c, true
		}
	}
	return levee.Critical, false
}

// FormatCriticality returns c's wire name; an invalid c is sent as CRITICAL.
func FormatCriticality(c levee.Criticality) string {
	if !c.Valid() {
		c = levee.Critical
	}
	return c.String()
}

// ParseTenant parses Levee-Tenant values. The header must carry exactly one
// id (repeated headers count only if they are identical; a comma is part of
// the id); surrounding spaces are trimmed. An id made of at most
// MaxTenantLen bytes of printable ASCII (0x21..0x7e, inner spaces allowed) is
// returned as it is, without allocating. A longer id, or one with non-ASCII
// bytes, is returned as HashTenant(id). An empty id, conflicting repeated
// ids, or an id with control characters (below 0x20, 0x7f) or invalid UTF-8
// returns "", false.
func ParseTenant(vals []string) (string, bool) {
	if len(vals) == 0 {
		return "", false
	}
	t := trimOWS(vals[0])
	for _, v := range vals[1:] {
		if trimOWS(v) != t {
			return "", false
		}
	}
	if t == "" {
		return "", false
	}
	plain := len(t) <= MaxTenantLen
	for i := 0; i < len(t); i++ {
		c := t[i]
		if c < 0x20 || c == 0x7f {
			return "", false
		}
		if c >= 0x80 {
			plain = false
		}
	}
	if plain {
		return t, true
	}
	if !utf8.ValidString(t) {
		return "", false
	}
	for _, r := range t {
		if r >= 0x80 && r < 0xa0 || r == utf8.RuneError {
			return "", false
		}
	}
	return HashTenant(t), true
}

// HashTenantPrefix starts every hashed tenant id.
const HashTenantPrefix = "h~"

// HashTenant returns a bounded printable form of the tenant id t: "h~"
// followed by 32 hex digits of its SHA-256 (a collision-resistant hash, so
// that a caller cannot pick an id that lands on another tenant's id).
func HashTenant(t string) string {
	sum := sha256.Sum256([]byte(t))
	var b [len(HashTenantPrefix) + 32]byte
	copy(b[:], HashTenantPrefix)
	hex.Encode(b[len(HashTenantPrefix):], sum[:16])
	return string(b[:])
}

// FormatTenant returns the wire form of tenant t, which is t itself when
// ParseTenant would keep it and HashTenant(t) otherwise; it returns "" (send
// no header) when t is empty or would be refused.
func FormatTenant(t string) string {
	p, ok := ParseTenant([]string{t})
	if !ok {
		return ""
	}
	return p
}

// AppendPeerTenant appends the tenant levee assigns to an untrusted caller at
// addr: its network prefix, /24 for IPv4 (and IPv4-mapped IPv6) and /64 for
// IPv6, so that a caller rotating ids (or addresses inside its subnet) stays
// one tenant. An invalid addr appends "unknown".
func AppendPeerTenant(dst []byte, addr netip.Addr) []byte {
	if !addr.IsValid() {
		return append(dst, "unknown"...)
	}
	addr = addr.Unmap().WithZone("")
	bits := 64
	if addr.Is4() {
		bits = 24
	}
	p, err := addr.Prefix(bits)
	if err != nil {
		return append(dst, "unknown"...)
	}
	return p.AppendTo(dst)
}

// PeerTenant returns the tenant of an untrusted caller whose remote address
// is hostport ("ip:port" as in http.Request.RemoteAddr, or a bare ip); see
// AppendPeerTenant. Anything unparsable (a Unix socket path, "") gives
// "unknown".
func PeerTenant(hostport string) string {
	var addr netip.Addr
	if ap, err := netip.ParseAddrPort(hostport); err == nil {
		addr = ap.Addr()
	} else if a, err := netip.ParseAddr(hostport); err == nil {
		addr = a
	} else {
		return "unknown"
	}
	var b [64]byte
	return string(AppendPeerTenant(b[:0], addr))
}

// ParseAttempt parses Levee-Attempt values: a decimal attempt number, 0 for
// a first attempt, clamped to MaxAttempt. Of several valid elements it
// returns the highest. Negative or malformed elements are ignored; with none
// valid it returns 0, false.
func ParseAttempt(vals []string) (int, bool) {
	best, found := int64(0), false
	elements(vals, func(e string) bool {
		if len(e) > 0 && e[0] == '-' {
			return true
		}
		n, ok := parseInt(e, MaxAttempt)
		if ok && (!found || n > best) {
			best, found = n, true
		}
		return true
	})
	return int(best), found
}

var attemptNames = [MaxAttempt + 1]string{"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"}

// FormatAttempt returns n clamped to 0..MaxAttempt as a decimal string,
// without allocating.
func FormatAttempt(n int) string {
	return attemptNames[min(max(n, 0), MaxAttempt)]
}

const maxRetryAfterMs = int64(MaxRetryAfter / time.Millisecond)

// ParseRetryAfterMs parses Levee-Retry-After-Ms (or grpc-retry-pushback-ms)
// values: decimal milliseconds ≥ 0, clamped to MaxRetryAfter. Of several
// valid elements it returns the longest. Negative elements (gRPC's "-1",
// don't retry) are reported through noRetry and otherwise ignored; with no
// valid element ok is false.
func ParseRetryAfterMs(vals []string) (d time.Duration, noRetry, ok bool) {
	best := int64(0)
	elements(vals, func(e string) bool {
		n, valid := parseInt(e, maxRetryAfterMs)
		switch {
		case !valid:
		case n < 0 || e[0] == '-':
			noRetry = true
		case !ok || n > best:
			best, ok = n, true
		}
		return true
	})
	return time.Duration(best) * time.Millisecond, noRetry, ok
}

// AppendRetryAfterMs appends d in whole milliseconds, rounded up, clamped to
// 0..MaxRetryAfter.
func AppendRetryAfterMs(dst []byte, d time.Duration) []byte {
	d = min(max(d, 0), MaxRetryAfter)
	return strconv.AppendInt(dst, int64((d+time.Millisecond-1)/time.Millisecond), 10)
}

// FormatRetryAfterMs returns AppendRetryAfterMs as a string.
func FormatRetryAfterMs(d time.Duration) string {
	var b [24]byte
	return string(AppendRetryAfterMs(b[:0], d))
}

// ParseRetryAfter parses standard Retry-After values at time now: whole
// seconds (clamped to MaxRetryAfter) or an HTTP date in any of the three
// formats http.ParseTime accepts (a date in the past gives 0). Of several valid values it returns the longest; with none valid
// it returns 0, false. Only the date form allocates.
func ParseRetryAfter(vals []string, now time.Time) (time.Duration, bool) {
	best, found := time.Duration(0), false
	for _, v := range vals {
		v = trimOWS(v)
		var d time.Duration
		if n, ok := parseInt(v, int64(MaxRetryAfter/time.Second)); ok && v[0] != '-' {
			d = time.Duration(n) * time.Second
		} else if t, err := http.ParseTime(v); err == nil {
			d = min(max(t.Sub(now), 0), MaxRetryAfter)
		} else {
			continue
		}
		if !found || d > best {
			best, found = d, true
		}
	}
	return best, found
}

// AppendRetryAfter appends d as standard Retry-After whole seconds, rounded
// up and at least 1 (a 0 would invite an immediate retry), at most
// MaxRetryAfter.
func AppendRetryAfter(dst []byte, d time.Duration) []byte {
	d = min(max(d, 0), MaxRetryAfter)
	s := int64((d + time.Second - 1) / time.Second)
	return strconv.AppendInt(dst, max(s, 1), 10)
}

// FormatRetryAfter returns AppendRetryAfter as a string.
func FormatRetryAfter(d time.Duration) string {
	var b [24]byte
	return string(AppendRetryAfter(b[:0], d))
}

// NoRetryParam is the parameter of Levee-Reject that tells every layer not
// to retry.
const NoRetryParam = "no-retry"

var rejectNames = [...][2]string{
	levee.Overloaded: {"overloaded", "overloaded; no-retry"},
	levee.Quota:      {"quota", "quota; no-retry"},
	levee.Deadline:   {"deadline", "deadline; no-retry"},
	levee.Throttled:  {"throttled", "throttled; no-retry"},
}

// FormatReject returns the Levee-Reject value for reason r, followed by
// "; no-retry" when noRetry is set, without allocating. An invalid r is sent
// as "overloaded".
func FormatReject(r levee.Reason, noRetry bool) string {
	if r == 0 || int(r) >= len(rejectNames) {
		r = levee.Overloaded
	}
	if noRetry {
		return rejectNames[r][1]
	}
	return rejectNames[r][0]
}

// ParseReject parses a Levee-Reject value: a reason name ("overloaded",
// "quota", "deadline", "throttled"; ASCII case ignored) followed by optional
// ";"-separated parameters of which only "no-retry" means something (others
// are ignored, for forward compatibility). Repeated headers: the first valid
// one gives the reason and any of them can set noRetry. With none valid it
// returns 0, false, false.
func ParseReject(vals []string) (r levee.Reason, noRetry, ok bool) {
	for _, v := range vals {
		head, params, _ := strings.Cut(v, ";")
		rr, valid := parseReason(trimOWS(head))
		if !valid {
			continue
		}
		if !ok {
			r, ok = rr, true
		}
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			if strings.EqualFold(trimOWS(p), NoRetryParam) {
				noRetry = true
			}
		}
	}
	return r, noRetry, ok
}

func parseReason(s string) (levee.Reason, bool) {
	for i := 1; i < len(rejectNames); i++ {
		if strings.EqualFold(s, rejectNames[i][0]) {
			return levee.Reason(i), true
		}
	}
	return 0, false
}

// AppendLoad appends a Levee-Load value: load (max over signals of value ÷
// target, 1.0 = at target) with 3 decimals, clamped to 0..MaxLoad; NaN
// appends "0".
func AppendLoad(dst []byte, load float64) []byte {
	if !(load > 0) {
		load = 0
	}
	load = min(load, MaxLoad)
	return strconv.AppendFloat(dst, load, 'f', 3, 64)
}

// ParseLoad parses Levee-Load values: a finite non-negative decimal number,
// clamped to MaxLoad; of several valid elements the highest. NaN, infinities,
// negative or malformed elements are ignored; with none valid it returns
// 0, false.
func ParseLoad(vals []string) (float64, bool) {
	best, found := 0.0, false
	elements(vals, func(e string) bool {
		for i := 0; i < len(e); i++ {
			if c := e[i]; (c < '0' || c > '9') && c != '.' {
				return true // no sign, exponent, NaN or Inf
			}
		}
		f, err := strconv.ParseFloat(e, 64)
		if err != nil && !math.IsInf(f, 1) || math.IsNaN(f) {
			return true
		}
		f = min(f, MaxLoad)
		if !found || f > best {
			best, found = f, true
		}
		return true
	})
	return best, found
}
