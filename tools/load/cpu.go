package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUReading is what a CPUSource saw at one moment.
type CPUReading struct {
	// Seconds is the cumulative CPU time of the process (user + system);
	// NaN-free, 0 when the source does not know it.
	Seconds float64
	// Utilisation is the busy share of the cores the process may use
	// (0..1), as levee's CPU signal reads it; 0 when unknown.
	Utilisation float64
}

// CPUSource reads a target's CPU use, so that a plan can state the CPU
// cost of a request. Read must be safe to call from one goroutine at a
// time and return promptly.
type CPUSource interface {
	Read(ctx context.Context) (CPUReading, error)
	// Name says where the reading comes from, for reports.
	Name() string
}

// ProcessCPU reads the CPU time of a local process from
// /proc/PID/stat (Linux): the cost of each request, and, given the cores
// it may use, its utilisation.
type ProcessCPU struct {
	PID int
	// Cores the process may use (GOMAXPROCS or its quota), to turn CPU
	// time into utilisation; 0 when unknown.
	Cores float64
	// Proc is the proc file system's root; default "/proc".
	Proc string

	last   CPUReading
	lastAt time.Time
}

// clockTicks is USER_HZ, the unit of utime and stime in /proc/PID/stat;
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// Name implements CPUSource.
func (p *ProcessCPU) Name() string { return "process " + strconv.Itoa(p.PID) }

// Read implements CPUSource. Utilisation is over the time since the
// previous Read.
func (p *ProcessCPU) Read(context.Context) (CPUReading, error) {
	root := p.Proc
	if root == "" {
		root = "/proc"
	}
	b, err := os.ReadFile(root + "/" + strconv.Itoa(p.PID) + "/stat")
	if err != nil {
		return CPUReading{}, fmt.Errorf("load: cpu of process %d: %w", p.PID, err)
	}
	secs, err := parseStat(b)
	if err != nil {
		return CPUReading{}, fmt.Errorf("load: cpu of process %d: %w", p.PID, err)
	}
	now := time.Now()
	r := CPUReading{Seconds: secs}
	if p.Cores > 0 && !p.lastAt.IsZero() {
		if wall := now.Sub(p.lastAt).Seconds(); wall > 0 {
			r.Utilisation = (secs - p.last.Seconds) / wall / p.Cores
		}
	}
	p.last, p.lastAt = r, now
	return r, nil
}

// parseStat returns utime + stime of a /proc/PID/stat line in seconds. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses itself: the fields are counted after the last ')'.
func parseStat(b []byte) (float64, error) {
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(s[i+1:])
	// After ')': state is field 3, utime field 14, stime field 15.
	if len(f) < 13 {
		return 0, errors.New("malformed stat")
	}
	ut, err1 := strconv.ParseUint(f[11], 10, 64)
	st, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, errors.New("malformed stat")
	}
	return float64(ut+st) / clockTicks, nil
}

// StatusCPU reads the utilisation of levee's CPU signal from a levee
// service's status JSON (leveehttp.StatusHandler, e.g.
// http://host/levee/status?history=0): the value of the signal named
// "cpu" in the current sample.
type StatusCPU struct {
	URL    string
	Client *http.Client // default: a client with a 2 s timeout
}

// Name implements CPUSource.
func (s *StatusCPU) Name() string { return "status " + s.URL }

// Read implements CPUSource.
func (s *StatusCPU) Read(ctx context.Context) (CPUReading, error) {
	c := s.Client
	if c == nil {
		c = &http.Client{Timeout: 2 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
	if err != nil {
		return CPUReading{}, fmt.Errorf("load: status: %w", err)
	}
	resp, err := c.Do(req)
	if err != nil {
		return CPUReading{}, fmt.Errorf("load: status: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return CPUReading{}, fmt.Errorf("load: status: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return CPUReading{}, fmt.Errorf("load: status: %s answered %s", s.URL, resp.Status)
	}
	u, err := statusCPU(body)
	if err != nil {
		return CPUReading{}, fmt.Errorf("load: status %s: %w", s.URL, err)
	}
	return CPUReading{Utilisation: u}, nil
}

// statusCPU finds current.signals[name == "cpu"].value in a status
// document.
func statusCPU(body []byte) (float64, error) {
	v, err := StatusSignal(body, "cpu")
	if err != nil && errors.Is(err, errNoSignal) {
		return 0, fmt.Errorf("%w (is levee's CPU signal enabled?)", err)
	}
	return v, err
}

var errNoSignal = errors.New("no signal named")

// StatusSignal finds the value of the signal called name in the current
// sample of a levee status document (leveehttp.StatusHandler's JSON). It
// reads only the fields it needs, by name, so that the status page's own
// types stay where they are defined.
func StatusSignal(body []byte, name string) (float64, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, fmt.Errorf("not a status document: %w", err)
	}
	var cur map[string]json.RawMessage
	if err := json.Unmarshal(doc["current"], &cur); err != nil || cur == nil {
		return 0, errors.New(`no "current" sample`)
	}
	var sigs []map[string]json.RawMessage
	if err := json.Unmarshal(cur["signals"], &sigs); err != nil {
		return 0, errors.New(`no "signals" in the current sample`)
	}
	for _, sig := range sigs {
		var n string
		if json.Unmarshal(sig["name"], &n) == nil && n == name {
			var v float64
			if err := json.Unmarshal(sig["value"], &v); err != nil {
				return 0, fmt.Errorf("the %q signal has no numeric value", name)
			}
			return v, nil
		}
	}
	return 0, fmt.Errorf("%w %q", errNoSignal, name)
}
