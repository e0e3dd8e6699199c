package pressure

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"
)

func TestParseSchedstat(t *testing.T) {
	tests := []struct {
		in      string
		want    time.Duration
		wantErr bool
	}{
		{in: "203547 35183399 2\n", want: 35183399},
		{in: "0 0 0", want: 0},
		{in: "", wantErr: true},
		{in: "1 2\n", wantErr: true},
		{in: "1 2 3 4\n", wantErr: true},
		{in: "1 -2 3\n", wantErr: true},
		{in: "1 +2 3\n", wantErr: true},
		{in: "1 02 3\n", wantErr: true},
		{in: "1  2 3\n", wantErr: true},
		{in: "1 99999999999999999999 3\n", wantErr: true},
	}
	for _, tt := range tests {
		got, err := parseSchedstat([]byte(tt.in))
		if tt.wantErr {
			if !errors.Is(err, errSchedstat) {
				t.Errorf("parseSchedstat(%q) = %v, %v; want an errSchedstat error", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("parseSchedstat(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func FuzzParseSchedstat(f *testing.F) {
	f.Add("203547 35183399 2\n")
	f.Add("0 0 0")
	f.Add("1 -1 1")
	f.Fuzz(func(t *testing.T, in string) {
		d, err := parseSchedstat([]byte(in))
		if err != nil {
			if !errors.Is(err, errSchedstat) || !strings.HasPrefix(err.Error(), "pressure: ") {
				t.Fatalf("parseSchedstat(%q): error %v is not a pressure: errSchedstat", in, err)
			}
			return
		}
		if f := strings.Split(strings.TrimSuffix(in, "\n"), " "); d < 0 || f[1] != strconv.FormatInt(int64(d), 10) {
			t.Fatalf("parseSchedstat(%q) = %d: not the second field as written", in, d)
		}
	})
}

func taskFS(waits map[string]int) fstest.MapFS {
	m := fstest.MapFS{}
	for tid, w := range waits {
		m["proc/self/task/"+tid+"/schedstat"] = &fstest.MapFile{Data: []byte("1 " + strconv.Itoa(w) + " 1\n")}
	}
	return m
}

func TestRunQueueWaitThreadsComeAndGo(t *testing.T) {
	w := newRunQueueWait(taskFS(map[string]int{"10": 100, "11": 50}))
	steps := []struct {
		waits map[string]int
		want  time.Duration
	}{
		{map[string]int{"10": 100, "11": 50}, 150},          // baseline: whole lives
		{map[string]int{"10": 130, "11": 60}, 190},          // +30 +10
		{map[string]int{"10": 140}, 200},                    // 11 exited: its wait is kept
		{map[string]int{"10": 140, "12": 25}, 225},          // a new thread counts in full
		{map[string]int{"10": 140, "12": 25, "13": 0}, 225}, // idle
		{map[string]int{"10": 5, "12": 30}, 230},            // tid 10 reused: no decrease
	}
	for i, st := range steps {
		w.fsys = taskFS(st.waits)
		got, err := w.read()
		if err != nil || got != st.want {
			t.Errorf("step %d: read = %v, %v; want %v", i, got, err, st.want)
		}
	}
	w.fsys = fstest.MapFS{"proc/self/task/1/schedstat": {Data: []byte("garbage\n")}}
	if _, err := w.read(); !errors.Is(err, errSchedstat) {
		t.Errorf("malformed schedstat: error %v; want errSchedstat", err)
	}
	w.fsys = fstest.MapFS{}
	if _, err := w.read(); err == nil {
		t.Errorf("no /proc/self/task: want an error")
	}
}

// TestCPURunQueueWait: a GOMAXPROCS=2 process pinned to one CPU, two busy
// goroutines, on a host where other processes take half of that CPU: it
// gets 0.5 core and its threads wait 1.5 cores in the run queue. Without
// the wait it reads 0.5; with it, 2.0.
func TestCPURunQueueWait(t *testing.T) {
	for _, on := range []bool{false, true} {
		f := &fakeCPU{busy: 0.5}
		var waited time.Duration
		c := newTestCPU(t, nil, 1, f, WithRunQueueWait(on))
		if on {
			c.cfg.wait = func() (time.Duration, error) { return waited, nil }
		}
		now := t0
		for range 10 {
			c.SampleAt(now)
			now = now.Add(100 * time.Millisecond)
			f.advance(100 * time.Millisecond)
			waited += 150 * time.Millisecond
		}
		want, wantWait := 0.5, math.NaN()
		if on {
			want, wantWait = 2, 1.5
		}
		r := c.Reading()
		if math.Abs(c.Value()-want) > 1e-9 || !(math.Abs(r.Wait-wantWait) < 1e-9 || math.IsNaN(wantWait) && math.IsNaN(r.Wait)) {
			t.Errorf("WithRunQueueWait(%v): Value = %v, Wait = %v; want %v, %v", on, c.Value(), r.Wait, want, wantWait)
		}
	}
}

func TestCPURunQueueWaitReal(t *testing.T) {
	c, err := NewCPU(WithRunQueueWait(true))
	if err != nil {
		t.Fatal(err)
	}
	c.SampleAt(time.Now())
	c.SampleAt(time.Now().Add(100 * time.Millisecond))
	if r := c.Reading(); r.Err != nil || math.IsNaN(r.Wait) || r.Wait < 0 {
		t.Errorf("real run-queue wait: %+v", r)
	}
}
