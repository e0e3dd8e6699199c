package load

import (
	"net/http"
	"strings"
	"testing"
)

// FuzzCheck: any check text either parses or is refused with a message
// that quotes it, and a parsed check evaluates any response without
// panicking.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{"*: status=200", "1-3: header:X-Degraded=1", ">=2: json:data.items[0].id=\"a\"", "<=1: !json:a", "0: !header:X"} {
		f.Add(s, []byte(`{"data":{"items":[{"id":"a"}]},"a":1}`))
	}
	f.Fuzz(func(t *testing.T, s string, body []byte) {
		c, err := ParseCheck(s)
		if err != nil {
			if !strings.Contains(err.Error(), "check") {
				t.Errorf("error %q does not say which check", err)
			}
			return
		}
		_ = c.Applies(2)
		_ = c.Eval(200, http.Header{"X-Degraded": {"1"}}, body)
	})
}

// FuzzParseShares: weights are never negative, NaN or infinite, and there
// are at most MaxTenants classes.
func FuzzParseShares(f *testing.F) {
	for _, s := range []string{"CRITICAL=3,SHEDDABLE=1", "20", "a,b=2", "x=1e309", "=", "a=NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		shares, err := ParseShares(s)
		if err != nil {
			return
		}
		if len(shares) > MaxTenants && !strings.Contains(s, ",") {
			t.Errorf("%q: %d classes", s, len(shares))
		}
		for _, sh := range shares {
			if !(sh.Weight >= 0) || sh.Weight > 1e308 || sh.Name == "" {
				t.Errorf("%q: share %+v", s, sh)
			}
		}
	})
}

// FuzzStatusCPU: any document gives a value or an error, never a panic.
func FuzzStatusCPU(f *testing.F) {
	f.Add([]byte(`{"current":{"signals":[{"name":"cpu","value":0.5}]}}`))
	f.Add([]byte(`{"current":{"signals":[{"name":"cpu","value":null}]}}`))
	f.Add([]byte(`{"current":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = statusCPU(b)
	})
}

// FuzzParseStat: any /proc/PID/stat line gives a non-negative time or an
// error.
func FuzzParseStat(f *testing.F) {
	f.Add([]byte("1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 100 0 0\n"))
	f.Add([]byte("1 (x) R"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if v, err := parseStat(b); err == nil && v < 0 {
			t.Errorf("negative CPU time %v", v)
		}
	})
}
