package pressure

import (
	"sync"
	"testing"
	"time"
)

// TestPauses: a request is out of the count in the handler while any of
// its pauses lasts, back in when the last ends; End closes a pause still
// open (a goroutine that outlived its handler) without unbalancing the
// count, returns the time paused, and later calls do nothing.
func TestPauses(t *testing.T) {
	c := NewConcurrency()
	at := time.Now()
	s := c.StartAt(at, 0)
	other := c.StartAt(at, 0)
	var p Pauses
	p.Pause(c)
	p.Pause(c) // overlapping: a fan-out's second wait
	if got := c.InFlight(); got != 1 {
		t.Errorf("in flight while paused: %d; want 1 (the other request)", got)
	}
	p.Unpause(c)
	if got := c.InFlight(); got != 1 {
		t.Errorf("in flight with one of two pauses over: %d; want 1", got)
	}
	time.Sleep(2 * time.Millisecond)
	p.Unpause(c)
	if got := c.InFlight(); got != 2 {
		t.Errorf("in flight after the pauses: %d; want 2", got)
	}
	p.Unpause(c) // unbalanced: ignored
	if got := c.InFlight(); got != 2 {
		t.Errorf("in flight after an extra Unpause: %d; want 2", got)
	}
	p.Pause(c) // still open when the handler returns
	paused := p.End(c, time.Now())
	if paused < 2*time.Millisecond {
		t.Errorf("time paused %v; want at least the 2 ms slept", paused)
	}
	if got := c.InFlight(); got != 2 {
		t.Errorf("in flight after End closed an open pause: %d; want 2 (DoneAt not yet called)", got)
	}
	p.Pause(c)
	p.Unpause(c)
	if got, again := c.InFlight(), p.End(c, time.Now()); got != 2 || again != 0 {
		t.Errorf("after End: in flight %d, End again %v; want 2 and 0 (calls after End do nothing)", got, again)
	}
	c.DoneAt(s, time.Now(), paused)
	c.DoneAt(other, time.Now(), 0)
	if got := c.inflight.Load(); got != 0 {
		t.Errorf("in flight after both ended: %d; want 0", got)
	}
}

// TestPausesConcurrent: pauses from many goroutines racing End leave the
// count balanced (run with -race).
func TestPausesConcurrent(t *testing.T) {
	c := NewConcurrency()
	for range 200 {
		s := c.StartAt(time.Now(), 0)
		var p Pauses
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				p.Pause(c)
				p.Unpause(c)
			})
		}
		p.End(c, time.Now())
		wg.Wait()
		c.DoneAt(s, time.Now(), 0)
	}
	if got := c.inflight.Load(); got != 0 { // unclamped: a drift below 0 shows
		t.Errorf("in flight after 200 requests with racing pauses: %d; want 0", got)
	}
}
