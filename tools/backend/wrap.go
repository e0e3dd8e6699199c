package backend

import "net/http"

// Wrap puts a protection around the application handler app and returns
// the handler that serves every request. Wraps let a program that uses the
// harness (levee's bench module) plug in protections that this module must
// not import, such as the peer libraries levee is measured against: see
// Options.Extra and loopback.HijackWith. A Wrap runs in the backend
// process; any control loop it needs it starts itself, and it lives as
// long as the process.
type Wrap func(app http.Handler) http.Handler
