package config

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Target receives the configurations a Reloader applies: the admission
// controller, the signals, the degradation controller, an HTTP router, a
// fleet quota client. A reload is applied in two phases: every target's
// Check sees the candidate first, and only when all of them (and the
// Reloader's own validation) accept it does the Reloader publish it and
// call every Apply, in the order the targets were subscribed. So a
// configuration is applied whole or not at all.
type Target interface {
	// Check reports whether next can be applied; an error rejects the
	// reload and is reported with the configuration's own problems. It
	// must not change anything.
	Check(next *Config) error
	// Apply puts next in force. It must not fail (what could fail belongs
	// in Check) and should return quickly: reloads are serialised.
	Apply(next *Config)
}

// TargetFunc is a Target with nothing to check.
type TargetFunc func(next *Config)

// Check returns nil.
func (f TargetFunc) Check(*Config) error { return nil }

// Apply calls f(next).
func (f TargetFunc) Apply(next *Config) { f(next) }

// ErrNoFile is the error of a Reload on a Reloader built from a Config in
// code (NewReloader): there is no file to read again.
var ErrNoFile = errors.New("config: no file to reload")

// State is the configuration in force and where it came from.
type State struct {
	// Config is the configuration in force; never modified.
	Config *Config
	// Generation is 1 for the first configuration and increases by one
	// with each applied change.
	Generation uint64
	// Source is the file, or "" for a Config built in code.
	Source string
	// AppliedAt is when this configuration was put in force.
	AppliedAt time.Time
	// Hash identifies the configuration (Config.Hash).
	Hash string
}

// Result is the outcome of one reload.
type Result struct {
	// Reason says what asked for the reload: "poll", "sighup", "admin",
	// "override" or "call".
	Reason string
	// At is when the reload ran.
	At time.Time
	// Applied is true when a changed configuration was put in force.
	// False with a nil Err means nothing changed.
	Applied bool
	// Generation is the generation in force after the reload.
	Generation uint64
	// Changes lists what changed (Applied), or what would have (Err).
	Changes []Change
	// Err is why the candidate was rejected: an *Error listing every
	// problem, or the error reading the file. The configuration in force
	// did not change.
	Err error
}

// Stats are a Reloader's counters, for metrics.
type Stats struct {
	Generation uint64
	// Applied, Rejected and Unchanged count reloads by outcome.
	Applied, Rejected, Unchanged uint64
	// Changes counts the fields changed by applied reloads.
	Changes uint64
	// AppliedAt is when the configuration in force was applied.
	AppliedAt time.Time
	// LastOK reports whether the last reload was not rejected.
	LastOK bool
	// Overrides is the number of runtime overrides in force.
	Overrides int
}

// Reloader holds the configuration in force and changes it: when its file
// changes (polled at reload.poll), on SIGHUP (reload.sighup), when Reload
// is called (the admin endpoint does), and when an override is set. Every
// change is validated whole, checked by every Target, then published and
// applied, or rejected whole with the configuration in force kept. Every
// outcome is logged, applied changes field by field (path, old → new), and
// counted (Stats).
//
// Current is one atomic load: read it on any path. Reloads are serialised.
// All methods are safe for concurrent use.
type Reloader struct {
	state atomic.Pointer[State]

	mu        sync.Mutex
	path      string
	base      *Config // for a Config built in code
	opts      options
	overrides map[string]string
	targets   []Target
	seen      fileStamp // the file content last read
	pollErr   string    // the last polling error logged
	last      Result

	applied, rejected, unchanged, changes atomic.Uint64
	lastOK                                atomic.Bool
	kick                                  chan struct{}
}

type fileStamp struct {
	mod  time.Time
	size int64
	sum  [sha256.Size]byte
}

// Open loads the file at path (as Load does, with opts) and returns a
// Reloader holding it. Call Run to follow the file.
func Open(path string, opts ...Option) (*Reloader, error) {
	r := newReloader(path, nil, opts)
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	cfg, _, err := build(nil, path, data, true, r.opts)
	if err != nil {
		return nil, err
	}
	r.seen = stampOf(path, data)
	r.publish(cfg, 1)
	return r, nil
}

// NewReloader returns a Reloader for cfg, a Config built in code, with the
// environment and opts applied (see Resolve). Its configuration changes
// only through overrides; Reload returns ErrNoFile.
func NewReloader(cfg *Config, opts ...Option) (*Reloader, error) {
	r := newReloader("", cfg.Clone(), opts)
	next, _, err := build(r.base, "", nil, false, r.opts)
	if err != nil {
		return nil, err
	}
	r.publish(next, 1)
	return r, nil
}

func newReloader(path string, base *Config, opts []Option) *Reloader {
	o := newOptions(opts)
	r := &Reloader{path: path, base: base, opts: o, overrides: o.overrides, kick: make(chan struct{}, 1)}
	r.opts.overrides = nil
	r.lastOK.Store(true)
	return r
}

func (r *Reloader) publish(cfg *Config, gen uint64) {
	r.state.Store(&State{Config: cfg, Generation: gen, Source: r.path, AppliedAt: time.Now(), Hash: cfg.Hash()})
}

// Current returns the configuration in force. Do not modify it.
func (r *Reloader) Current() *Config { return r.state.Load().Config }

// State returns the configuration in force with its generation and origin.
func (r *Reloader) State() State { return *r.state.Load() }

// Subscribe adds targets. Each is checked against the configuration in
// force and applied at once, so that it starts in step; a target whose
// Check fails is not added, and its error returned.
func (r *Reloader) Subscribe(ts ...Target) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	cur := r.Current()
	for _, t := range ts {
		if t == nil {
			continue
		}
		if err := t.Check(cur); err != nil {
			return err
		}
		t.Apply(cur)
		r.targets = append(r.targets, t)
	}
	return nil
}

// Reload reads the file again and applies it if it changed and is valid.
func (r *Reloader) Reload() Result { return r.reloadFile("call") }

// ReloadFor is Reload with the reason recorded in the result and the log
// ("admin", "sighup", ...).
func (r *Reloader) ReloadFor(reason string) Result { return r.reloadFile(reason) }

func (r *Reloader) reloadFile(reason string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.path == "" {
		return r.finish(Result{Reason: reason, Err: ErrNoFile})
	}
	data, err := readFile(r.path)
	if err != nil {
		return r.finish(Result{Reason: reason, Err: err})
	}
	r.seen = stampOf(r.path, data)
	return r.apply(reason, data, r.overrides)
}

// SetOverride sets the field at path (as in "admit.dry_run") to value
// (written as in an environment variable) over the file and the
// environment, until ClearOverride; it survives reloads of the file. The
// override is kept only if the resulting configuration is applied.
func (r *Reloader) SetOverride(path, value string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	next := make(map[string]string, len(r.overrides)+1)
	for k, v := range r.overrides {
		next[k] = v
	}
	next[path] = value
	return r.rebuild("override", next)
}

// ClearOverride removes the override of path, if any, so that the file
// and the environment decide the field again.
func (r *Reloader) ClearOverride(path string) Result {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.overrides[path]; !ok {
		return r.finish(Result{Reason: "override"})
	}
	next := make(map[string]string, len(r.overrides))
	for k, v := range r.overrides {
		if k != path {
			next[k] = v
		}
	}
	return r.rebuild("override", next)
}

// Overrides returns a copy of the overrides in force, by field path; the
// value of a secret field (admin.token) shows Redacted.
func (r *Reloader) Overrides() map[string]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	secret := map[string]bool{}
	for _, l := range leaves(r.Current()) {
		secret[l.path] = l.secret
	}
	out := make(map[string]string, len(r.overrides))
	for k, v := range r.overrides {
		if secret[k] {
			v = redactString(v)
		}
		out[k] = v
	}
	return out
}

// rebuild builds again from the file last read (or the base) with other
// overrides.
func (r *Reloader) rebuild(reason string, overrides map[string]string) Result {
	if r.path == "" {
		return r.apply(reason, nil, overrides)
	}
	data, err := readFile(r.path)
	if err != nil {
		return r.finish(Result{Reason: reason, Err: err})
	}
	r.seen = stampOf(r.path, data)
	return r.apply(reason, data, overrides)
}

// apply builds a candidate, checks it and puts it in force. r.mu is held.
func (r *Reloader) apply(reason string, data []byte, overrides map[string]string) Result {
	opts := r.opts
	opts.overrides = overrides
	next, ps, err := build(r.base, r.path, data, r.path != "", opts)
	if err != nil {
		return r.finish(Result{Reason: reason, Err: err})
	}
	cur := r.state.Load()
	changes := Diff(cur.Config, next)
	for _, c := range changes {
		if c.Restart {
			ps.at(c.Path, fmt.Sprintf("cannot change while the service runs (in force: %s, new: %s): restart to apply it", c.Old, c.New))
		}
	}
	if err := ps.err(); err != nil {
		return r.finish(Result{Reason: reason, Changes: changes, Err: err})
	}
	for _, t := range r.targets {
		if err := t.Check(next); err != nil {
			ps.add(origin{source: r.path}, "", err.Error())
		}
	}
	if err := ps.err(); err != nil {
		return r.finish(Result{Reason: reason, Changes: changes, Err: err})
	}
	r.overrides = overrides
	if len(changes) == 0 {
		return r.finish(Result{Reason: reason})
	}
	r.publish(next, cur.Generation+1)
	for _, t := range r.targets {
		t.Apply(next)
	}
	select {
	case r.kick <- struct{}{}:
	default:
	}
	return r.finish(Result{Reason: reason, Applied: true, Changes: changes})
}

// finish completes a result, counts it and logs it.
func (r *Reloader) finish(res Result) Result {
	res.At = time.Now()
	st := r.state.Load()
	res.Generation = st.Generation
	l := r.opts.logger
	src := r.path
	switch {
	case res.Err != nil:
		r.rejected.Add(1)
		r.lastOK.Store(false)
		l.Error("config: rejected; the configuration in force is unchanged",
			"reason", res.Reason, "source", src, "generation", st.Generation, "error", res.Err.Error())
	case res.Applied:
		r.applied.Add(1)
		r.changes.Add(uint64(len(res.Changes)))
		r.lastOK.Store(true)
		l.Info("config: applied", "reason", res.Reason, "source", src, "generation", st.Generation,
			"hash", st.Hash, "changes", len(res.Changes))
		for _, c := range res.Changes {
			l.Info("config: changed", "field", c.Path, "old", c.Old, "new", c.New, "generation", st.Generation)
		}
	default:
		r.unchanged.Add(1)
		r.lastOK.Store(true)
		l.Debug("config: unchanged", "reason", res.Reason, "source", src, "generation", st.Generation)
	}
	r.last = res
	return res
}

// Last returns the result of the last reload, and false before any.
func (r *Reloader) Last() (Result, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, !r.last.At.IsZero()
}

// Stats returns the counters.
func (r *Reloader) Stats() Stats {
	st := r.state.Load()
	r.mu.Lock()
	n := len(r.overrides)
	r.mu.Unlock()
	return Stats{
		Generation: st.Generation,
		Applied:    r.applied.Load(),
		Rejected:   r.rejected.Load(),
		Unchanged:  r.unchanged.Load(),
		Changes:    r.changes.Load(),
		AppliedAt:  st.AppliedAt,
		LastOK:     r.lastOK.Load(),
		Overrides:  n,
	}
}

// Run follows the file until ctx is done: it checks the file every
// reload.poll (modification time and size, then the content's hash, so
// that a rewrite with the same content is not a change and a rejected
// file is reported once) and reloads it on SIGHUP when reload.sighup is
// set. The poll period follows the configuration in force. Run returns at
// once for a Reloader without a file. Run one Run per Reloader.
func (r *Reloader) Run(ctx context.Context) {
	if r.path == "" {
		return
	}
	var hup chan os.Signal
	if r.Current().Reload.SIGHUP {
		hup = make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
	}
	for {
		var tick <-chan time.Time
		var t *time.Timer
		if p := r.Current().Reload.Poll; p > 0 {
			t = time.NewTimer(p)
			tick = t.C
		}
		select {
		case <-ctx.Done():
			if t != nil {
				t.Stop()
			}
			return
		case <-tick:
			r.poll()
		case <-hup:
			r.reloadFile("sighup")
		case <-r.kick:
		}
		if t != nil {
			t.Stop()
		}
	}
}

// poll reloads the file if it changed since it was last read.
func (r *Reloader) poll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	fi, err := os.Stat(r.path)
	if err != nil {
		if msg := err.Error(); msg != r.pollErr {
			r.pollErr = msg
			r.opts.logger.Warn("config: cannot read the file; the configuration in force is unchanged", "source", r.path, "error", msg)
		}
		return
	}
	r.pollErr = ""
	if fi.ModTime().Equal(r.seen.mod) && fi.Size() == r.seen.size {
		return
	}
	data, err := readFile(r.path)
	if err != nil {
		r.finish(Result{Reason: "poll", Err: err})
		return
	}
	st := stampOf(r.path, data)
	same := st.sum == r.seen.sum
	r.seen = st
	if same {
		return
	}
	r.apply("poll", data, r.overrides)
}

// stampOf returns the file's modification time and size as of now with the
// hash of data. The time is read after the content, so that a write
// racing the read shows as a change at the next poll.
func stampOf(path string, data []byte) fileStamp {
	st := fileStamp{sum: sha256.Sum256(data), size: -1}
	if fi, err := os.Stat(path); err == nil {
		st.mod, st.size = fi.ModTime(), fi.Size()
		if st.size != int64(len(data)) {
			st.size = -1 // changed since it was read: look again next time
		}
	}
	return st
}
