package load

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// Check is a user's statement about the responses of a service at some
// degradation levels: their status, a header, or a field of their JSON
// body. Write it as
//
//	LEVELS: status=CODE            status=200, status=2xx
//	LEVELS: header:NAME[=VALUE]    the header is present (with that value)
//	LEVELS: !header:NAME           the header is absent
//	LEVELS: json:PATH[=VALUE]      the body's JSON has the field (equal to VALUE)
//	LEVELS: !json:PATH             the body's JSON lacks the field
//
// LEVELS is a level (2), a range (1-3), a bound (>=1, <=2) or * for every
// level, 0 being the service undegraded. PATH is dotted with indexes
// (items[0].id; a leading $. or . is allowed). VALUE is compared as JSON
// when it parses as JSON (true, 3, null, "x", [1]), else as a string.
type Check struct {
	// Source is the check as written.
	Source     string
	minL, maxL int
	kind       string // status, header, json
	negate     bool
	name       string // header name or JSON path
	value      string
	hasValue   bool
	path       []pathStep
	want       any // VALUE as JSON, when it parses
	wantIsJSON bool
}

type pathStep struct {
	key   string
	index int // ≥ 0 for [i]
}

// ParseCheck parses a check (see Check).
func ParseCheck(s string) (Check, error) {
	c := Check{Source: strings.TrimSpace(s)}
	levels, cond, ok := strings.Cut(c.Source, ":")
	if !ok {
		return c, fmt.Errorf("check %q: want LEVELS: CONDITION, e.g. 1: status=200", s)
	}
	if err := c.parseLevels(strings.TrimSpace(levels)); err != nil {
		return c, fmt.Errorf("check %q: %w", s, err)
	}
	cond = strings.TrimSpace(cond)
	if strings.HasPrefix(cond, "!") {
		c.negate, cond = true, strings.TrimSpace(cond[1:])
	}
	switch {
	case strings.HasPrefix(cond, "status="):
		c.kind, c.value, c.hasValue = "status", strings.TrimSpace(strings.TrimPrefix(cond, "status=")), true
		if !validStatus(c.value) || c.negate {
			return c, fmt.Errorf("check %q: want status=CODE such as 200 or 2xx", s)
		}
	case strings.HasPrefix(cond, "header:"):
		c.kind = "header"
		c.name, c.value, c.hasValue = strings.Cut(strings.TrimPrefix(cond, "header:"), "=")
		c.name = strings.TrimSpace(c.name)
		if c.name == "" || (c.negate && c.hasValue) {
			return c, fmt.Errorf("check %q: want header:NAME, header:NAME=VALUE or !header:NAME", s)
		}
	case strings.HasPrefix(cond, "json:"):
		c.kind = "json"
		c.name, c.value, c.hasValue = strings.Cut(strings.TrimPrefix(cond, "json:"), "=")
		c.name = strings.TrimSpace(c.name)
		var err error
		if c.path, err = parsePath(c.name); err != nil || (c.negate && c.hasValue) {
			return c, fmt.Errorf("check %q: want json:PATH, json:PATH=VALUE or !json:PATH with a path such as data.items[0].id", s)
		}
		if c.hasValue {
			c.value = strings.TrimSpace(c.value)
			c.wantIsJSON = json.Unmarshal([]byte(c.value), &c.want) == nil
		}
	default:
		return c, fmt.Errorf("check %q: the condition is status=…, header:…, json:… (or !header:…, !json:…)", s)
	}
	return c, nil
}

func (c *Check) parseLevels(s string) error {
	bad := fmt.Errorf("levels %q: want a level (2), a range (1-3), >=N, <=N or *", s)
	atoi := func(x string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(x))
		return n, err == nil && n >= 0 && n <= 100
	}
	switch {
	case s == "*":
		c.minL, c.maxL = 0, 100
	case strings.HasPrefix(s, ">="):
		n, ok := atoi(s[2:])
		if !ok {
			return bad
		}
		c.minL, c.maxL = n, 100
	case strings.HasPrefix(s, "<="):
		n, ok := atoi(s[2:])
		if !ok {
			return bad
		}
		c.minL, c.maxL = 0, n
	case strings.Contains(s, "-"):
		a, b, _ := strings.Cut(s, "-")
		lo, ok1 := atoi(a)
		hi, ok2 := atoi(b)
		if !ok1 || !ok2 || lo > hi {
			return bad
		}
		c.minL, c.maxL = lo, hi
	default:
		n, ok := atoi(s)
		if !ok {
			return bad
		}
		c.minL, c.maxL = n, n
	}
	return nil
}

// Applies reports whether the check concerns degradation level l.
func (c *Check) Applies(l int) bool { return l >= c.minL && l <= c.maxL }

func validStatus(v string) bool {
	if len(v) != 3 {
		return false
	}
	if v[1:] == "xx" {
		return v[0] >= '1' && v[0] <= '5'
	}
	n, err := strconv.Atoi(v)
	return err == nil && n >= 100 && n <= 599
}

func parsePath(p string) ([]pathStep, error) {
	p = strings.TrimPrefix(strings.TrimPrefix(p, "$"), ".")
	if p == "" {
		return nil, fmt.Errorf("empty path")
	}
	var out []pathStep
	for _, part := range strings.Split(p, ".") {
		key, rest, _ := strings.Cut(part, "[")
		if key != "" {
			out = append(out, pathStep{key: key, index: -1})
		}
		for rest != "" {
			idx, after, ok := strings.Cut(rest, "]")
			n, err := strconv.Atoi(idx)
			if !ok || err != nil || n < 0 {
				return nil, fmt.Errorf("bad index in %q", part)
			}
			out = append(out, pathStep{index: n})
			rest = strings.TrimPrefix(after, "[")
			if after != "" && !strings.HasPrefix(after, "[") {
				return nil, fmt.Errorf("bad path %q", part)
			}
		}
		if key == "" && len(out) == 0 {
			return nil, fmt.Errorf("bad path %q", part)
		}
	}
	return out, nil
}

// Eval checks one response (its status, headers and up to 1 MiB of its
// body) and returns "" if it passes, or what was wrong.
func (c *Check) Eval(status int, header http.Header, body []byte) string {
	switch c.kind {
	case "status":
		got := strconv.Itoa(status)
		if c.value == got || (c.value[1:] == "xx" && got[0] == c.value[0]) {
			return ""
		}
		return "status " + got
	case "header":
		vals, present := header[http.CanonicalHeaderKey(c.name)]
		switch {
		case c.negate && present:
			return fmt.Sprintf("header %s present (%q)", c.name, strings.Join(vals, ", "))
		case c.negate:
			return ""
		case !present:
			return "header " + c.name + " absent"
		case c.hasValue && !containsFold(vals, c.value):
			return fmt.Sprintf("header %s is %q", c.name, strings.Join(vals, ", "))
		}
		return ""
	case "json":
		var doc any
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.UseNumber()
		if err := dec.Decode(&doc); err != nil {
			if c.negate {
				return ""
			}
			return "body is not JSON"
		}
		v, found := lookup(doc, c.path)
		switch {
		case c.negate && found:
			return fmt.Sprintf("field %s present (%s)", c.name, short(v))
		case c.negate:
			return ""
		case !found:
			return "field " + c.name + " absent"
		case c.hasValue && !c.equal(v):
			return fmt.Sprintf("field %s is %s", c.name, short(v))
		}
		return ""
	}
	return "unknown check"
}

func containsFold(vals []string, v string) bool {
	for _, x := range vals {
		if strings.TrimSpace(x) == v {
			return true
		}
	}
	return false
}

func lookup(doc any, path []pathStep) (any, bool) {
	v := doc
	for _, st := range path {
		if st.index < 0 {
			m, ok := v.(map[string]any)
			if !ok {
				return nil, false
			}
			if v, ok = m[st.key]; !ok {
				return nil, false
			}
			continue
		}
		a, ok := v.([]any)
		if !ok || st.index >= len(a) {
			return nil, false
		}
		v = a[st.index]
	}
	return v, true
}

// equal compares a JSON value with the check's VALUE: as JSON when VALUE
// parses as JSON, else as the string it is.
func (c *Check) equal(v any) bool {
	got, _ := json.Marshal(v)
	if c.wantIsJSON {
		want, _ := json.Marshal(c.want)
		return bytes.Equal(normaliseJSON(got), normaliseJSON(want))
	}
	s, ok := v.(string)
	return ok && s == c.value
}

// normaliseJSON re-encodes a JSON document so that numbers compare by
// value (1 and 1.0 are equal).
func normaliseJSON(b []byte) []byte {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return b
	}
	out, _ := json.Marshal(v)
	return out
}

func short(v any) string {
	b, _ := json.Marshal(v)
	if len(b) > 60 {
		return string(b[:57]) + "…"
	}
	return string(b)
}
