// Package backend is the service levee's demo and loopback checks
// overload: an HTTP handler that burns a calibrated amount of real CPU per
// request (a xorshift loop, Calibrate measures its speed on the machine),
// never sleeps, never waits on a semaphore and never looks at its context,
// so that a saturated process queues requests in the kernel and the Go run
// queue exactly as DESIGN.md's "Where the queue really is" describes.
//
// A Server puts that handler either alone (None: how most Go services run)
// or behind leveehttp.NewHandler with an admit.Controller fed by the default
// pressure signals (Levee), and counts in 100 ms buckets the handler runs,
// the runs that finished after their client's deadline (work done for
// nobody; the client sends its deadline in load.DeadlineHeader), and the
// responses by class. For levee it also records which signal was furthest
// above its target while shedding (Report.ShedBy).
//
// Within levee's layers (vocabulary and leaves → policies → adapters → tools →
// commands; imports point down only), backend is a tool in the tools module
// (github.com/levee-dev/levee/tools): it imports leveehttp, admit and pressure
// to protect its handler, and tools/load and tools/report for the load
// generator's headers and the report schema; the loopback harness and its
// labs, tools/grpclab, the command's demo in cmd/ and the bench/ module import
// it.
package backend
