package backend

import (
	"context"
	"net"
	"net/http"

	"github.com/levee-dev/levee/admit"
	"github.com/levee-dev/levee/leveehttp"
	"github.com/levee-dev/levee/pressure"
)

// protect puts app behind levee with its defaults: the default pressure
// signals (process CPU, scheduler latency, queueing delay from the
// listener's arrival stamps) feeding an admit.Controller, and
// leveehttp.NewHandler in front of app; Options.Levee changes what it
// says (LeveeOptions).
func (s *Server) protect(app http.Handler) (http.Handler, error) {
	o := s.opts.Levee
	trust, err := o.trust()
	if err != nil {
		return nil, err
	}
	set, err := pressure.Default(o.signalOptions()...)
	if err != nil {
		return nil, err
	}
	sigs := set.Signals()
	var backlog *leveehttp.Backlog
	if set.Sched != nil {
		// The accept queue counts as demand not read yet, with the
		// goroutines waiting for a processor (leveehttp.Backlog).
		backlog = leveehttp.NewBacklog(set.Sched)
		sigs = backlog.Replace(sigs)
	}
	if o.ForceOverload {
		sigs = append(sigs, overloaded{})
	}
	ctrl := admit.New(admit.WithSignals(sigs...))
	s.ctrl = ctrl
	s.loops = append(s.loops, set.Run, ctrl.Run)
	s.listen = func(ln net.Listener) net.Listener {
		if backlog != nil {
			backlog.Watch(ln) // for the process's life
		}
		return leveehttp.Listener(ln)
	}
	s.connContext = leveehttp.ConnContext
	hopts := []leveehttp.HandlerOption{leveehttp.WithQueueDelay(set.Queue)}
	if set.Concurrency != nil {
		hopts = append(hopts, leveehttp.WithConcurrency(set.Concurrency))
	}
	if trust != nil {
		hopts = append(hopts, leveehttp.WithTrust(trust))
	}
	return leveehttp.NewHandler(app, ctrl, hopts...), nil
}

// Serve serves s on ln until ln is closed, with the listener and
// connection hooks the protection needs.
func (s *Server) Serve(ln net.Listener, hs *http.Server) error {
	hs.Handler = s.Handler
	if s.connContext != nil {
		hs.ConnContext = s.connContext
	}
	if s.listen != nil {
		ln = s.listen(ln)
		if g, ok := ln.(interface{ Gone() uint64 }); ok {
			s.mu.Lock()
			s.gone = g
			s.mu.Unlock()
		}
	}
	return hs.Serve(ln)
}

type connContextFunc = func(ctx context.Context, c net.Conn) context.Context
