package backend

import (
	"io"
	"log"
	"strings"
	"sync"
)

// ErrorLog is a backend's http.Server error log (http.Server.ErrorLog):
// net/http writes there the panics it recovers in handlers ("http: panic
// serving …", with the stack) and its other complaints about connections
// and handlers. It counts every message by kind (its first three words)
// and copies to its writer every panic, up to maxCopied of them, and the
// first copiesPerKind messages of each other kind, so that a lab can tell
// a panic from the noise of hostile traffic in a bounded stderr. Safe for
// concurrent use.
type ErrorLog struct {
	out io.Writer

	mu     sync.Mutex
	panics int64
	kinds  map[string]int64
	copied int
}

// Bounds of what an ErrorLog copies and counts.
const (
	maxCopied     = 100
	copiesPerKind = 3
	maxKinds      = 64
)

// panicPrefix starts the message net/http logs for a handler's panic.
const panicPrefix = "http: panic serving"

// NewErrorLog returns an ErrorLog copying to out (nil: nowhere).
func NewErrorLog(out io.Writer) *ErrorLog {
	if out == nil {
		out = io.Discard
	}
	return &ErrorLog{out: out, kinds: map[string]int64{}}
}

// Logger returns a log.Logger writing to l, for http.Server.ErrorLog.
func (l *ErrorLog) Logger() *log.Logger { return log.New(l, "", 0) }

// Write counts one message (log.Logger writes each in one call).
func (l *ErrorLog) Write(p []byte) (int, error) {
	msg := string(p)
	kind := errorKind(msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	isPanic := strings.HasPrefix(msg, panicPrefix)
	if isPanic {
		l.panics++
	}
	n, seen := l.kinds[kind]
	if seen || len(l.kinds) < maxKinds {
		l.kinds[kind] = n + 1
	} else {
		l.kinds["other"]++
	}
	if l.copied < maxCopied && (isPanic || n < copiesPerKind) {
		l.copied++
		_, _ = l.out.Write(p)
	}
	return len(p), nil
}

// Panics returns the handler panics logged so far.
func (l *ErrorLog) Panics() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.panics
}

// Kinds returns a copy of the counts by kind.
func (l *ErrorLog) Kinds() map[string]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]int64, len(l.kinds))
	for k, v := range l.kinds {
		out[k] = v
	}
	return out
}

// errorKind returns the first three words of msg's first line.
func errorKind(msg string) string {
	line, _, _ := strings.Cut(msg, "\n")
	f := strings.Fields(line)
	return strings.Join(f[:min(3, len(f))], " ")
}
