package leveegrpc

import (
	"bytes"
	"context"
	"encoding/binary"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/levee-dev/levee/admit"
)

// TestSlowUnarySendersNotServiceTime: unary calls whose message arrives
// long after their headers must not teach the method's service time the
// upload (the tap admits a call at its headers; the interceptor marks
// the start of service once the message is in, admit.Ticket.Start).
// Counted, 3,200 calls whose 10-byte message trickles in 2 s after the
// headers would teach the method a 2 s service time, and every later
// call with a 1 s deadline would be refused before its handler as one
// whose deadline cannot be met (admit's TestSlowUploadNotServiceTime is
// the same on virtual time, and shows the lockout without Start).
func TestSlowUnarySendersNotServiceTime(t *testing.T) {
	if testing.Short() {
		t.Skip("3,200 raw HTTP/2 calls over 2 s")
	}
	const (
		slow  = 3200
		conns = 8
		delay = 2 * time.Second
	)
	ctl := admit.New(admit.WithRoute(Method))
	s := NewServer(ctl)
	target, dopt := startServer(t, tcpNet, &echoImpl{}, s.ServerOptions()...)
	addr := strings.TrimPrefix(target, "passthrough:///")

	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := slowUnaryCalls(addr, slow/conns, delay); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	cc := dial(t, target, dopt)
	var refused, n int
	for range 200 {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := callEcho(ctx, cc, "x")
		cancel()
		n++
		if err != nil {
			refused++
			if refused == 1 {
				t.Logf("first refusal: %v (%v)", err, status.Code(err))
			}
		}
	}
	t.Logf("after %d unary calls whose message came %v after their headers: %d of %d calls with a 1 s deadline refused", slow, delay, refused, n)
	if refused > n/100 {
		t.Errorf("%d of %d calls with a 1 s deadline refused after slow senders, want ≤ 1%%", refused, n)
	}
}

// slowUnaryCalls opens one HTTP/2 connection to addr, sends the headers
// of n unary Echo calls, waits delay, sends each call's message and
// reads until every call has ended.
func slowUnaryCalls(addr string, n int, delay time.Duration) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(delay + 20*time.Second))
	if _, err := c.Write([]byte(http2.ClientPreface)); err != nil {
		return err
	}
	fr := http2.NewFramer(c, c)
	if err := fr.WriteSettings(); err != nil {
		return err
	}
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{
		{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: echoMethod}, {Name: ":authority", Value: addr},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"},
	} {
		if err := enc.WriteField(f); err != nil {
			return err
		}
	}
	block := hb.Bytes()
	for i := range n {
		if err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: block, EndHeaders: true}); err != nil {
			return err
		}
	}

	// Read the server's frames meanwhile: acknowledge its settings and
	// count the calls that ended (a HEADERS or DATA frame ending a stream).
	ended := make(chan error, 1)
	var wmu sync.Mutex
	go func() {
		done := 0
		for done < n {
			f, err := fr.ReadFrame()
			if err != nil {
				ended <- err
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					wmu.Lock()
					err = fr.WriteSettingsAck()
					wmu.Unlock()
				}
			case *http2.PingFrame:
				if !f.IsAck() {
					wmu.Lock()
					err = fr.WritePing(true, f.Data)
					wmu.Unlock()
				}
			case *http2.RSTStreamFrame:
				done++
			default:
				if f.Header().Flags.Has(http2.FlagHeadersEndStream) {
					done++
				}
			}
			if err != nil {
				ended <- err
				return
			}
		}
		ended <- nil
	}()

	time.Sleep(delay)
	msg, err := proto.Marshal(wrapperspb.String("slow sent"))
	if err != nil {
		return err
	}
	body := make([]byte, 5+len(msg))
	binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
	copy(body[5:], msg)
	for i := range n {
		wmu.Lock()
		err := fr.WriteData(uint32(2*i+1), true, body)
		wmu.Unlock()
		if err != nil {
			return err
		}
	}
	return <-ended
}
