package wire

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee"
)

var huge = strings.Repeat("9", 10000)

func TestParseTimeoutMs(t *testing.T) {
	tests := []struct {
		name   string
		vals   []string
		want   time.Duration
		wantOK bool
	}{
		{"missing", nil, 0, false},
		{"empty", []string{""}, 0, false},
		{"valid", []string{"250"}, 250 * time.Millisecond, true},
		{"spaces", []string{" 250\t"}, 250 * time.Millisecond, true},
		{"zero expired", []string{"0"}, 0, true},
		{"negative expired", []string{"-5"}, 0, true},
		{"minus zero", []string{"-0"}, 0, true},
		{"huge negative", []string{"-" + huge}, 0, true},
		{"over 24h clamped", []string{"86400001"}, MaxTimeout, true},
		{"huge clamped", []string{huge}, MaxTimeout, true},
		{"decimal malformed", []string{"1.5"}, 0, false},
		{"exponent malformed", []string{"1e3"}, 0, false},
		{"plus malformed", []string{"+5"}, 0, false},
		{"NaN", []string{"NaN"}, 0, false},
		{"Inf", []string{"Inf"}, 0, false},
		{"unicode digits", []string{"١٢٣"}, 0, false},
		{"fullwidth digits", []string{"１２"}, 0, false},
		{"lone minus", []string{"-"}, 0, false},
		{"unit suffix", []string{"100ms"}, 0, false},
		{"repeated min", []string{"500", "100", "300"}, 100 * time.Millisecond, true},
		{"list min", []string{"500, 100 ,300"}, 100 * time.Millisecond, true},
		{"malformed ignored", []string{"abc", "400", "1.5"}, 400 * time.Millisecond, true},
		{"repeated with expired", []string{"400", "-1"}, 0, true},
		{"empty elements", []string{",,, ,"}, 0, false},
		{"control chars", []string{"1\x00"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseTimeoutMs(tt.vals)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseTimeoutMs(%q) = %v, %v; want %v, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseGRPCTimeout(t *testing.T) {
	tests := []struct {
		name   string
		vals   []string
		want   time.Duration
		wantOK bool
	}{
		{"missing", nil, 0, false},
		{"hours", []string{"2H"}, 2 * time.Hour, true},
		{"minutes", []string{"3M"}, 3 * time.Minute, true},
		{"seconds", []string{"1S"}, time.Second, true},
		{"millis", []string{"100m"}, 100 * time.Millisecond, true},
		{"micros", []string{"7u"}, 7 * time.Microsecond, true},
		{"nanos", []string{"99999999n"}, 99999999, true},
		{"zero expired", []string{"0S"}, 0, true},
		{"max digits hours clamped", []string{"99999999H"}, MaxTimeout, true},
		{"25H clamped", []string{"25H"}, MaxTimeout, true},
		{"nine digits malformed", []string{"123456789m"}, 0, false},
		{"no unit", []string{"100"}, 0, false},
		{"unit only", []string{"S"}, 0, false},
		{"bad unit", []string{"10s"}, 0, false},
		{"negative", []string{"-1S"}, 0, false},
		{"plus", []string{"+1S"}, 0, false},
		{"NaN", []string{"NaNS"}, 0, false},
		{"unicode", []string{"１S"}, 0, false},
		{"huge", []string{huge + "S"}, 0, false},
		{"repeated min", []string{"1S", "20m"}, 20 * time.Millisecond, true},
		{"malformed ignored", []string{"x", "2S"}, 2 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseGRPCTimeout(tt.vals)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseGRPCTimeout(%q) = %v, %v; want %v, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestParseTimeout(t *testing.T) {
	tests := []struct {
		name                 string
		leveeMs, grpc, envoy []string
		want                 time.Duration
		wantOK               bool
	}{
		{"none", nil, nil, nil, 0, false},
		{"levee only", []string{"300"}, nil, nil, 300 * time.Millisecond, true},
		{"grpc only", nil, []string{"2S"}, nil, 2 * time.Second, true},
		{"envoy only", nil, nil, []string{"150"}, 150 * time.Millisecond, true},
		{"min of all", []string{"300"}, []string{"200m"}, []string{"250"}, 200 * time.Millisecond, true},
		{"envoy smallest", []string{"300"}, []string{"2S"}, []string{"50"}, 50 * time.Millisecond, true},
		{"malformed levee ignored", []string{"x"}, []string{"2S"}, nil, 2 * time.Second, true},
		{"expired wins", []string{"300"}, []string{"0m"}, nil, 0, true},
		{"all malformed", []string{"x"}, []string{"y"}, []string{"z"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseTimeout(tt.leveeMs, tt.grpc, tt.envoy)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseTimeout(%q, %q, %q) = %v, %v; want %v, %v", tt.leveeMs, tt.grpc, tt.envoy, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestFormatTimeout(t *testing.T) {
	tests := []struct {
		d        time.Duration
		ms, grpc string
	}{
		{-time.Second, "0", "0n"},
		{0, "0", "0n"},
		{1500 * time.Microsecond, "1", "1500000n"},
		{time.Second, "1000", "1000000u"},
		{100 * time.Millisecond, "100", "100000u"},
		{99999999, "99", "99999999n"},
		{100000000, "100", "100000u"},
		{time.Hour, "3600000", "3600000m"},
		{48 * time.Hour, "86400000", "86400000m"},
	}
	for _, tt := range tests {
		if got := FormatTimeoutMs(tt.d); got != tt.ms {
			t.Errorf("FormatTimeoutMs(%v) = %q; want %q", tt.d, got, tt.ms)
		}
		if got := FormatGRPCTimeout(tt.d); got != tt.grpc {
			t.Errorf("FormatGRPCTimeout(%v) = %q; want %q", tt.d, got, tt.grpc)
		}
	}
}

func TestParseCriticality(t *testing.T) {
	tests := []struct {
		name   string
		vals   []string
		want   levee.Criticality
		wantOK bool
	}{
		{"missing", nil, levee.Critical, false},
		{"empty", []string{""}, levee.Critical, false},
		{"critical plus", []string{"CRITICAL_PLUS"}, levee.CriticalPlus, true},
		{"critical", []string{"CRITICAL"}, levee.Critical, true},
		{"sheddable plus", []string{"SHEDDABLE_PLUS"}, levee.SheddablePlus, true},
		{"sheddable", []string{"SHEDDABLE"}, levee.Sheddable, true},
		{"lower case", []string{"sheddable_plus"}, levee.SheddablePlus, true},
		{"spaces", []string{"  SHEDDABLE "}, levee.Sheddable, true},
		{"number 4", []string{"4"}, levee.CriticalPlus, true},
		{"number 3", []string{"3"}, levee.Critical, true},
		{"number 2", []string{"2"}, levee.SheddablePlus, true},
		{"number 1", []string{"1"}, levee.Sheddable, true},
		{"number 0", []string{"0"}, levee.Critical, false},
		{"number 5", []string{"5"}, levee.Critical, false},
		{"negative", []string{"-1"}, levee.Critical, false},
		{"huge", []string{huge}, levee.Critical, false},
		{"NaN", []string{"NaN"}, levee.Critical, false},
		{"unicode digit", []string{"٤"}, levee.Critical, false},
		{"unicode lookalike", []string{"CRİTICAL"}, levee.Critical, false},
		{"prefix", []string{"CRITICAL_PLUSX"}, levee.Critical, false},
		{"repeated takes least important", []string{"CRITICAL_PLUS", "SHEDDABLE"}, levee.Sheddable, true},
		{"list takes least important", []string{"4, 2"}, levee.SheddablePlus, true},
		{"malformed ignored", []string{"bogus", "CRITICAL_PLUS"}, levee.CriticalPlus, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseCriticality(tt.vals)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseCriticality(%q) = %v, %v; want %v, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	if got := FormatCriticality(levee.Criticality(9)); got != "CRITICAL" {
		t.Errorf("FormatCriticality(9) = %q; want CRITICAL", got)
	}
}

func TestParseTenant(t *testing.T) {
	long := strings.Repeat("a", MaxTenantLen+1)
	tests := []struct {
		name   string
		vals   []string
		want   string
		wantOK bool
	}{
		{"missing", nil, "", false},
		{"empty", []string{""}, "", false},
		{"blank", []string{"   "}, "", false},
		{"valid", []string{"acme"}, "acme", true},
		{"trimmed", []string{" acme "}, "acme", true},
		{"inner space", []string{"acme corp"}, "acme corp", true},
		{"comma kept", []string{"a,b"}, "a,b", true},
		{"max length kept", []string{long[1:]}, long[1:], true},
		{"long hashed", []string{long}, HashTenant(long), true},
		{"huge hashed", []string{huge}, HashTenant(huge), true},
		{"unicode hashed", []string{"société"}, HashTenant("société"), true},
		{"nul refused", []string{"a\x00b"}, "", false},
		{"newline refused", []string{"a\nb"}, "", false},
		{"del refused", []string{"a\x7fb"}, "", false},
		{"C1 control refused", []string{"a\u0085b"}, "", false},
		{"invalid utf8 refused", []string{"a\xffb"}, "", false},
		{"repeated identical", []string{"acme", "acme "}, "acme", true},
		{"repeated conflicting", []string{"acme", "evil"}, "", false},
		{"negative looking", []string{"-1"}, "-1", true},
		{"NaN is an id", []string{"NaN"}, "NaN", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseTenant(tt.vals)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseTenant(%q) = %q, %v; want %q, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	h := HashTenant(long)
	if len(h) != len(HashTenantPrefix)+32 || !strings.HasPrefix(h, HashTenantPrefix) {
		t.Errorf("HashTenant = %q; want %q + 32 hex digits", h, HashTenantPrefix)
	}
	if HashTenant(long) == HashTenant(long+"b") {
		t.Errorf("HashTenant collides on distinct ids")
	}
}

func TestPeerTenant(t *testing.T) {
	tests := []struct{ in, want string }{
		{"192.0.2.77:5000", "192.0.2.0/24"},
		{"192.0.2.200:1", "192.0.2.0/24"},
		{"192.0.2.1", "192.0.2.0/24"},
		{"[2001:db8:1:2:3:4:5:6]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::9%eth0]:443", "2001:db8:1:2::/64"},
		{"[::ffff:10.1.2.3]:80", "10.1.2.0/24"},
		{"", "unknown"},
		{"/tmp/sock", "unknown"},
		{"@", "unknown"},
		{huge, "unknown"},
	}
	for _, tt := range tests {
		if got := PeerTenant(tt.in); got != tt.want {
			t.Errorf("PeerTenant(%q) = %q; want %q", tt.in, got, tt.want)
		}
	}
	if got := string(AppendPeerTenant(nil, netip.Addr{})); got != "unknown" {
		t.Errorf("AppendPeerTenant(zero) = %q; want unknown", got)
	}
}

func TestParseAttempt(t *testing.T) {
	tests := []struct {
		name   string
		vals   []string
		want   int
		wantOK bool
	}{
		{"missing", nil, 0, false},
		{"zero", []string{"0"}, 0, true},
		{"two", []string{"2"}, 2, true},
		{"clamped", []string{"12"}, MaxAttempt, true},
		{"huge clamped", []string{huge}, MaxAttempt, true},
		{"negative ignored", []string{"-1"}, 0, false},
		{"NaN", []string{"NaN"}, 0, false},
		{"decimal", []string{"1.0"}, 0, false},
		{"unicode", []string{"２"}, 0, false},
		{"repeated max", []string{"0", "2", "1"}, 2, true},
		{"malformed ignored", []string{"x, 1"}, 1, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseAttempt(tt.vals)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseAttempt(%q) = %v, %v; want %v, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	for _, tt := range []struct {
		n    int
		want string
	}{{-3, "0"}, {0, "0"}, {2, "2"}, {100, "9"}} {
		if got := FormatAttempt(tt.n); got != tt.want {
			t.Errorf("FormatAttempt(%d) = %q; want %q", tt.n, got, tt.want)
		}
	}
}

func TestParseRetryAfterMs(t *testing.T) {
	tests := []struct {
		name        string
		vals        []string
		want        time.Duration
		wantNoRetry bool
		wantOK      bool
	}{
		{"missing", nil, 0, false, false},
		{"valid", []string{"1500"}, 1500 * time.Millisecond, false, true},
		{"zero", []string{"0"}, 0, false, true},
		{"grpc no retry", []string{"-1"}, 0, true, false},
		{"minus zero", []string{"-0"}, 0, true, false},
		{"huge clamped", []string{huge}, MaxRetryAfter, false, true},
		{"NaN", []string{"NaN"}, 0, false, false},
		{"decimal", []string{"1.5"}, 0, false, false},
		{"unicode", []string{"１"}, 0, false, false},
		{"repeated longest", []string{"100", "900", "300"}, 900 * time.Millisecond, false, true},
		{"repeated with no retry", []string{"100", "-1"}, 100 * time.Millisecond, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, nr, ok := ParseRetryAfterMs(tt.vals)
			if got != tt.want || nr != tt.wantNoRetry || ok != tt.wantOK {
				t.Errorf("ParseRetryAfterMs(%q) = %v, %v, %v; want %v, %v, %v", tt.vals, got, nr, ok, tt.want, tt.wantNoRetry, tt.wantOK)
			}
		})
	}
	for _, tt := range []struct {
		d        time.Duration
		ms, secs string
	}{
		{-time.Second, "0", "1"},
		{0, "0", "1"},
		{time.Microsecond, "1", "1"},
		{1500 * time.Millisecond, "1500", "2"},
		{2 * time.Second, "2000", "2"},
		{100 * time.Hour, "86400000", "86400"},
	} {
		if got := FormatRetryAfterMs(tt.d); got != tt.ms {
			t.Errorf("FormatRetryAfterMs(%v) = %q; want %q", tt.d, got, tt.ms)
		}
		if got := FormatRetryAfter(tt.d); got != tt.secs {
			t.Errorf("FormatRetryAfter(%v) = %q; want %q", tt.d, got, tt.secs)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		vals   []string
		want   time.Duration
		wantOK bool
	}{
		{"missing", nil, 0, false},
		{"seconds", []string{"3"}, 3 * time.Second, true},
		{"date", []string{"Sun, 29 Nov 2026 12:00:05 GMT"}, 5 * time.Second, true},
		{"past date", []string{"Sun, 29 Nov 2026 11:00:00 GMT"}, 0, true},
		{"RFC 850 date", []string{"Sunday, 29-Nov-26 12:00:07 GMT"}, 7 * time.Second, true},
		{"asctime date", []string{"Sun Nov 29 12:00:09 2026"}, 9 * time.Second, true},
		{"date not GMT", []string{"Sun, 29 Nov 2026 12:00:05 PST"}, 0, false},
		{"negative", []string{"-3"}, 0, false},
		{"huge clamped", []string{huge}, MaxRetryAfter, true},
		{"NaN", []string{"NaN"}, 0, false},
		{"repeated longest", []string{"1", "4"}, 4 * time.Second, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRetryAfter(tt.vals, now)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseRetryAfter(%q) = %v, %v; want %v, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestReject(t *testing.T) {
	tests := []struct {
		name        string
		vals        []string
		want        levee.Reason
		wantNoRetry bool
		wantOK      bool
	}{
		{"missing", nil, 0, false, false},
		{"overloaded", []string{"overloaded"}, levee.Overloaded, false, true},
		{"no retry", []string{"overloaded; no-retry"}, levee.Overloaded, true, true},
		{"no spaces", []string{"overloaded;no-retry"}, levee.Overloaded, true, true},
		{"case", []string{"Quota; No-Retry"}, levee.Quota, true, true},
		{"deadline", []string{"deadline"}, levee.Deadline, false, true},
		{"throttled", []string{"throttled"}, levee.Throttled, false, true},
		{"unknown param ignored", []string{"quota; x=1"}, levee.Quota, false, true},
		{"unknown reason", []string{"busy; no-retry"}, 0, false, false},
		{"empty", []string{""}, 0, false, false},
		{"unicode", []string{"overloadéd"}, 0, false, false},
		{"huge", []string{huge}, 0, false, false},
		{"repeated", []string{"quota", "overloaded; no-retry"}, levee.Quota, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, nr, ok := ParseReject(tt.vals)
			if r != tt.want || nr != tt.wantNoRetry || ok != tt.wantOK {
				t.Errorf("ParseReject(%q) = %v, %v, %v; want %v, %v, %v", tt.vals, r, nr, ok, tt.want, tt.wantNoRetry, tt.wantOK)
			}
		})
	}
	if got := FormatReject(levee.Overloaded, true); got != "overloaded; no-retry" {
		t.Errorf("FormatReject(Overloaded, true) = %q", got)
	}
	if got := FormatReject(0, false); got != "overloaded" {
		t.Errorf("FormatReject(0, false) = %q; want overloaded", got)
	}
}

func TestLoad(t *testing.T) {
	tests := []struct {
		name   string
		vals   []string
		want   float64
		wantOK bool
	}{
		{"missing", nil, 0, false},
		{"valid", []string{"0.850"}, 0.85, true},
		{"integer", []string{"2"}, 2, true},
		{"NaN", []string{"NaN"}, 0, false},
		{"Inf", []string{"Inf"}, 0, false},
		{"negative", []string{"-1"}, 0, false},
		{"exponent", []string{"1e3"}, 0, false},
		{"huge clamped", []string{huge}, MaxLoad, true},
		{"repeated max", []string{"0.5", "1.5"}, 1.5, true},
		{"dots", []string{"..."}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseLoad(tt.vals)
			if got != tt.want || ok != tt.wantOK {
				t.Errorf("ParseLoad(%q) = %v, %v; want %v, %v", tt.vals, got, ok, tt.want, tt.wantOK)
			}
		})
	}
	for _, tt := range []struct {
		f    float64
		want string
	}{{0.8512, "0.851"}, {-1, "0.000"}, {2e9, "1000000.000"}} {
		if got := string(AppendLoad(nil, tt.f)); got != tt.want {
			t.Errorf("AppendLoad(%v) = %q; want %q", tt.f, got, tt.want)
		}
	}
}

func TestParsersDoNotAllocate(t *testing.T) {
	vals := []string{"500, 100", "abc", "-1"}
	crit := []string{"sheddable", "4"}
	ten := []string{"acme", "acme"}
	var buf [64]byte
	n := testing.AllocsPerRun(100, func() {
		ParseTimeout(vals, []string{"2S"}, vals)
		ParseCriticality(crit)
		ParseTenant(ten)
		ParseAttempt(vals)
		ParseRetryAfterMs(vals)
		ParseReject([]string{"overloaded; no-retry"})
		ParseLoad([]string{"0.5"})
		FormatReject(levee.Quota, true)
		FormatAttempt(2)
		AppendTimeoutMs(buf[:0], time.Second)
		AppendGRPCTimeout(buf[:0], time.Second)
		AppendRetryAfter(buf[:0], time.Second)
		AppendRetryAfterMs(buf[:0], time.Second)
		AppendLoad(buf[:0], 0.5)
		AppendPeerTenant(buf[:0], netip.AddrFrom4([4]byte{10, 0, 0, 1}))
	})
	if n != 0 {
		t.Errorf("parsers allocate %v times per run; want 0", n)
	}
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	ms := []string{"250"}
	crit := []string{"SHEDDABLE_PLUS"}
	ten := []string{"acme"}
	att := []string{"1"}
	for b.Loop() {
		ParseTimeout(ms, nil, nil)
		ParseCriticality(crit)
		ParseTenant(ten)
		ParseAttempt(att)
	}
}
