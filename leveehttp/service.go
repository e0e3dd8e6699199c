package leveehttp

import (
	"io"
	"net/http"
)

// Service time.
//
// The controller learns each route's service time (admit.WithRoute) from
// the start of service to Done. A request's upload is its caller's pace,
// not the server's work: a client trickling a body over seconds must not
// teach the route that it takes seconds (and then refuse every request
// with a shorter budget as one that "cannot be met"). So service starts
// when the handler has read the body: at each read of it that returns
// bytes or its end, the ticket's start moves there (admit.Ticket.Start),
// until the response begins (the first WriteHeader, Write or Flush),
// after which it stays. A request without a body starts at admission (or
// when it leaves the run queue). Streams, long polls that flush and
// hijacked connections teach nothing (admit.Ticket.Exclude): their length
// is their caller's choice. The cost is one branch per read for the 63
// tickets in 64 that are not measured, and no allocation: the body
// wrapper lives in the request's state.

// serviceBody moves the ticket's start of service to the handler's
// latest read of the body, until the response begins.
type serviceBody struct {
	io.ReadCloser
	st *state
}

// watchBody puts r's body, if it has one, behind the state's serviceBody.
// r is the Handler's own copy of the request.
func (st *state) watchBody(r *http.Request) {
	if r.Body == nil || r.Body == http.NoBody {
		return
	}
	st.body = serviceBody{ReadCloser: r.Body, st: st}
	r.Body = &st.body
}

func (b *serviceBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if (n > 0 || err == io.EOF) && !b.st.wrote.Load() {
		b.st.ticket.Start()
	}
	return n, err
}
