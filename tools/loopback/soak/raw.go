package soak

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Raw is a hostile exchange on a TCP connection of its own, written byte
// by byte where an HTTP client would refuse: malformed heads, control
// characters, oversized heads, pipelining, callers that leave, and slow
// senders. Do writes to c and returns the outcome it saw ("2xx", "400",
// "closed", "no answer", …).
type Raw struct {
	Name string
	// Slow exchanges hold their connection for seconds.
	Slow bool
	Do   func(ctx context.Context, c net.Conn, n uint64) string
}

// answerWait bounds how long a raw exchange waits for an answer.
const answerWait = 3 * time.Second

// send writes s and returns the class of the first answer.
func send(s string) func(context.Context, net.Conn, uint64) string {
	return func(_ context.Context, c net.Conn, _ uint64) string {
		if _, err := io.WriteString(c, s); err != nil {
			return "write failed"
		}
		return answerOf(c)
	}
}

// answerOf returns the class of the first answer on c.
func answerOf(c net.Conn) string { return answer(c, bufio.NewReader(c), answerWait) }

// answer reads, from r over c, one response's status line and the rest of
// its head and body (Content-Length only), waiting at most wait, and
// returns its class: the status code for a 4xx, its class otherwise,
// "closed" or "no answer".
func answer(c net.Conn, r *bufio.Reader, wait time.Duration) string {
	_ = c.SetReadDeadline(time.Now().Add(wait))
	line, err := r.ReadString('\n')
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return "no answer"
		}
		return "closed"
	}
	f := strings.Fields(line)
	if len(f) < 2 || len(f[1]) != 3 {
		return "garbled"
	}
	length := -1
	for {
		h, err := r.ReadString('\n')
		if err != nil {
			break
		}
		h = strings.TrimSpace(h)
		if h == "" {
			break
		}
		if k, v, ok := strings.Cut(h, ":"); ok && strings.EqualFold(k, "Content-Length") {
			length, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	if length > 0 {
		_, _ = io.CopyN(io.Discard, r, int64(length))
	}
	if f[1][0] == '4' {
		return f[1]
	}
	return f[1][:1] + "xx"
}

// trickle writes s one byte every gap, stopping early when ctx is done or
// a write fails; it says whether it wrote it all.
func trickle(ctx context.Context, c net.Conn, s string, gap time.Duration) bool {
	for i := range len(s) {
		if _, err := io.WriteString(c, s[i:i+1]); err != nil || !pause(ctx, gap) {
			return false
		}
	}
	return true
}

// pause waits d and says whether ctx is still live.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

const get = "GET /work HTTP/1.1\r\nHost: soak\r\n"

// RawExchanges are the raw hostile exchanges of the soak.
var RawExchanges = []Raw{
	{Name: "bad request line", Do: send("GARBAGE\r\n\r\n")},
	{Name: "bad version", Do: send("GET /work HTTP/9.9\r\nHost: soak\r\n\r\n")},
	{Name: "control character in tenant", Do: send(get + "Levee-Tenant: a\x01b\r\n\r\n")},
	{Name: "NUL in criticality", Do: send(get + "Levee-Criticality: CRITICAL\x00PLUS\r\n\r\n")},
	{Name: "bare CR in timeout", Do: send(get + "Levee-Timeout-Ms: 5\r0\r\n\r\n")},
	{Name: "folded tenant", Do: send(get + "Levee-Tenant: a\r\n folded\r\n\r\n")},
	{Name: "space before colon", Do: send(get + "Levee-Criticality : CRITICAL_PLUS\r\n\r\n")},
	{Name: "head of 1.2 MB", Do: send(get + "Levee-Tenant: " + strings.Repeat("t", 1200<<10) + "\r\n\r\n")},
	{Name: "500 tenant headers", Do: send(get + strings.Repeat("Levee-Tenant: x\r\n", 500) + "\r\n")},
	{Name: "HTTP/1.0 without host", Do: send("GET /work HTTP/1.0\r\nLevee-Criticality: SHEDDABLE\r\n\r\n")},
	{Name: "pipelined", Do: func(_ context.Context, c net.Conn, _ uint64) string {
		two := get + "Levee-Criticality: CRITICAL_PLUS\r\n\r\n" + get + "Levee-Timeout-Ms: -1\r\nConnection: close\r\n\r\n"
		if _, err := io.WriteString(c, two); err != nil {
			return "write failed"
		}
		r := bufio.NewReader(c)
		a := answer(c, r, answerWait)
		return a + ", then " + answer(c, r, answerWait)
	}},
	{Name: "caller gone", Do: func(_ context.Context, c net.Conn, _ uint64) string {
		if _, err := io.WriteString(c, get+"\r\n"); err != nil {
			return "write failed"
		}
		return "left"
	}},
	{Name: "slow head, a byte every 150 ms", Slow: true, Do: func(ctx context.Context, c net.Conn, _ uint64) string {
		if !trickle(ctx, c, get+"Levee-Timeout-Ms: 900\r\n\r\n", 150*time.Millisecond) {
			return "cut off"
		}
		return answerOf(c)
	}},
	{Name: "slow head, G then 500 ms", Slow: true, Do: func(ctx context.Context, c net.Conn, _ uint64) string {
		if _, err := io.WriteString(c, "G"); err != nil || !pause(ctx, 500*time.Millisecond) {
			return "cut off"
		}
		if _, err := io.WriteString(c, get[1:]+"\r\n"); err != nil {
			return "write failed"
		}
		return answerOf(c)
	}},
	{Name: "slow body", Slow: true, Do: func(ctx context.Context, c net.Conn, _ uint64) string {
		head := "POST /work HTTP/1.1\r\nHost: soak\r\nContent-Length: 40\r\n\r\n"
		if _, err := io.WriteString(c, head); err != nil {
			return "write failed"
		}
		if !trickle(ctx, c, strings.Repeat("b", 40), 200*time.Millisecond) {
			return "cut off"
		}
		return answerOf(c)
	}},
	{Name: "silent", Slow: true, Do: func(ctx context.Context, c net.Conn, _ uint64) string {
		_ = c.SetReadDeadline(time.Now().Add(15 * time.Second))
		done := make(chan string, 1)
		go func() {
			var b [1]byte
			_, err := c.Read(b[:])
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				done <- "held open"
				return
			}
			done <- "closed by the server"
		}()
		select {
		case s := <-done:
			return s
		case <-ctx.Done():
			return "cut off"
		}
	}},
}

// rawDriver runs the raw exchanges: the fast ones at a rate, each on its
// own goroutine (at most maxFast at once), the slow ones on a fixed pool
// of connections, each from a new source address.
type rawDriver struct {
	addr    string
	src     *Sources
	rate    float64
	slow    int
	maxFast int

	n        atomic.Uint64
	mu       sync.Mutex
	outcomes map[string]map[string]int64
}

func (d *rawDriver) count(name, outcome string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.outcomes[name] == nil {
		d.outcomes[name] = map[string]int64{}
	}
	d.outcomes[name][outcome]++
}

// exchange runs x on a new connection, closed when it returns or ctx is
// done.
func (d *rawDriver) exchange(ctx context.Context, x Raw) {
	c, err := d.src.Dial(ctx, "tcp", d.addr)
	if err != nil {
		// The backend's accept queue is full, or this process is out of
		// descriptors: back off rather than spin.
		d.count(x.Name, "dial failed")
		pause(ctx, 100*time.Millisecond)
		return
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	defer c.Close()
	if tc, ok := c.(*net.TCPConn); ok && x.Name == "caller gone" {
		_ = tc.SetLinger(0) // a reset, as a killed client sends
	}
	out := x.Do(ctx, c, d.n.Add(1))
	if ctx.Err() != nil && out != "left" {
		out = "cut off"
	}
	d.count(x.Name, out)
}

// run drives the exchanges until ctx is done and returns their outcomes.
func (d *rawDriver) run(ctx context.Context) map[string]map[string]int64 {
	d.outcomes = map[string]map[string]int64{}
	var fast, slow []Raw
	for _, x := range RawExchanges {
		if x.Slow {
			slow = append(slow, x)
		} else {
			fast = append(fast, x)
		}
	}
	var wg sync.WaitGroup
	for w := range d.slow {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; ctx.Err() == nil; i++ {
				d.exchange(ctx, slow[i%len(slow)])
			}
		}()
	}
	if d.rate > 0 && len(fast) > 0 {
		sem := make(chan struct{}, max(1, d.maxFast))
		tick := time.NewTicker(time.Duration(float64(time.Second) / d.rate))
		for i := 0; ctx.Err() == nil; i++ {
			select {
			case <-ctx.Done():
			case <-tick.C:
				select {
				case sem <- struct{}{}:
					wg.Add(1)
					go func(x Raw) {
						defer wg.Done()
						defer func() { <-sem }()
						d.exchange(ctx, x)
					}(fast[i%len(fast)])
				default:
					d.count(fast[i%len(fast)].Name, "skipped (too many open)")
				}
			}
		}
		tick.Stop()
	}
	wg.Wait()
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.outcomes
}
