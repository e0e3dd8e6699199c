package proxy

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestReplay(t *testing.T) {
	tests := []struct {
		name       string
		body       string
		keep       int
		readFirst  int // bytes the first attempt reads before failing
		replayable bool
	}{
		{"nothing read, keep 0: replayable", "hello", 0, 0, true},
		{"read, keep 0: not replayable", "hello", 0, 3, false},
		{"read within keep: replayable", "hello world", 64, 5, true},
		{"read all within keep: replayable", "hello world", 64, 11, true},
		{"read past keep: not replayable", strings.Repeat("x", 100), 64, 80, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newReplay(iotest.OneByteReader(strings.NewReader(tt.body)), tt.keep)
			first := r.reader()
			buf := make([]byte, max(tt.readFirst, 1))
			if _, err := io.ReadFull(first, buf[:tt.readFirst]); err != nil {
				t.Fatal(err)
			}
			if got := r.replayable(); got != tt.replayable {
				t.Fatalf("replayable = %v, want %v", got, tt.replayable)
			}
			if !tt.replayable {
				if _, err := r.getBody(); err != errNotReplayable {
					t.Errorf("getBody: %v, want errNotReplayable", err)
				}
				return
			}
			second := r.reader()
			if _, err := first.Read(buf[:1]); !errors.Is(err, errReplaced) {
				t.Errorf("the first attempt's reader after a retry: %v, want errReplaced", err)
			}
			got, err := io.ReadAll(second)
			if err != nil || string(got) != tt.body {
				t.Errorf("replayed %q (%v), want %q", got, err, tt.body)
			}
		})
	}
}

// TestReplayCallerGone: a body whose caller broke off cannot be replayed.
func TestReplayCallerGone(t *testing.T) {
	r := newReplay(iotest.ErrReader(io.ErrUnexpectedEOF), 64)
	if _, err := r.reader().Read(make([]byte, 8)); err != io.ErrUnexpectedEOF {
		t.Fatalf("read: %v", err)
	}
	if r.replayable() {
		t.Errorf("replayable after the caller's body failed, want not")
	}
}
