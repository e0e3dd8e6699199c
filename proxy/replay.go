package proxy

import (
	"errors"
	"io"
	"sync"
)

// replay streams a request body to one attempt after another. The body is
// never read ahead: each attempt's reader pulls from the caller as the
// backend consumes it, keeping the first keep bytes read so that a later
// attempt can send them again. Once more than keep bytes have been read
// the body can no longer be replayed (replayable reports false), and the
// current attempt streams on alone. With keep 0 a body is replayable only
// until its first byte is read: enough for an attempt whose connection was
// refused.
//
// Readers of earlier attempts may still be read by their transport after
// the proxy moved on (http.RoundTripper may close a request body after
// RoundTrip returns); they fail with errReplaced instead of stealing
// bytes.
type replay struct {
	src  io.Reader
	keep int

	pull sync.Mutex // serializes reads of src

	mu   sync.Mutex // guards what follows
	buf  []byte
	read int64 // bytes read from src
	over bool  // read past keep: no replay
	err  error // src's terminal error (io.EOF included)
	gen  int   // the current reader's generation
}

var errReplaced = errors.New("proxy: request body replaced by a retry")

// errNotReplayable is GetBody's error once the body cannot be sent again.
var errNotReplayable = errors.New("proxy: request body cannot be replayed")

func newReplay(src io.Reader, keep int) *replay { return &replay{src: src, keep: keep} }

// reader returns a reader of the whole body for a new attempt; earlier
// readers stop.
func (r *replay) reader() io.ReadCloser {
	r.mu.Lock()
	r.gen++
	g := r.gen
	r.mu.Unlock()
	return &replayReader{r: r, gen: g}
}

// getBody is http.Request.GetBody for an attempt, so that the transport
// can resend on a fresh connection a request it knows it never wrote.
func (r *replay) getBody() (io.ReadCloser, error) {
	if !r.replayable() {
		return nil, errNotReplayable
	}
	return r.reader(), nil
}

// replayable reports whether a new reader would deliver the whole body.
func (r *replay) replayable() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return !r.over && (r.err == nil || r.err == io.EOF)
}

type replayReader struct {
	r   *replay
	gen int
	pos int64
}

func (rr *replayReader) Read(p []byte) (int, error) {
	r := rr.r
	r.mu.Lock()
	if rr.gen != r.gen {
		r.mu.Unlock()
		return 0, errReplaced
	}
	if rr.pos < r.read {
		if r.over {
			r.mu.Unlock()
			return 0, errNotReplayable
		}
		n := copy(p, r.buf[rr.pos:])
		rr.pos += int64(n)
		r.mu.Unlock()
		return n, nil
	}
	if r.err != nil {
		r.mu.Unlock()
		return 0, r.err
	}
	r.mu.Unlock()

	r.pull.Lock()
	defer r.pull.Unlock()
	r.mu.Lock()
	stale := rr.gen != r.gen
	r.mu.Unlock()
	if stale {
		return 0, errReplaced
	}
	n, err := r.src.Read(p)
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > 0 {
		if !r.over && int(r.read)+n <= r.keep {
			r.buf = append(r.buf, p[:n]...)
		} else if !r.over {
			r.over, r.buf = true, nil
		}
		r.read += int64(n)
		rr.pos = r.read
	}
	if err != nil {
		r.err = err
	}
	return n, err
}

// Close does not close the caller's body: the server does, and a retry may
// still need it.
func (rr *replayReader) Close() error { return nil }
