package levee

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func TestCriticalityOrder(t *testing.T) {
	tests := []struct {
		c            Criticality
		name         string
		rank, number int
	}{
		{Sheddable, "SHEDDABLE", 0, 1},
		{SheddablePlus, "SHEDDABLE_PLUS", 1, 2},
		{Critical, "CRITICAL", 2, 3},
		{CriticalPlus, "CRITICAL_PLUS", 3, 4},
	}
	for _, tt := range tests {
		if got := tt.c.String(); got != tt.name {
			t.Errorf("String(%d) = %q, want %q", tt.c, got, tt.name)
		}
		if got := tt.c.Rank(); got != tt.rank {
			t.Errorf("%v.Rank() = %d, want %d", tt.c, got, tt.rank)
		}
		if got := tt.c.Number(); got != tt.number {
			t.Errorf("%v.Number() = %d, want %d", tt.c, got, tt.number)
		}
		if got := FromRank(tt.rank); got != tt.c {
			t.Errorf("FromRank(%d) = %v, want %v", tt.rank, got, tt.c)
		}
		if got := Criticalities()[tt.rank]; got != tt.c {
			t.Errorf("Criticalities()[%d] = %v, want %v", tt.rank, got, tt.c)
		}
	}
	var zero Criticality
	if zero != Critical {
		t.Errorf("zero Criticality = %v, want CRITICAL", zero)
	}
	if got := Criticality(9).String(); got != "Criticality(9)" {
		t.Errorf("invalid String = %q", got)
	}
	if got := Criticality(9).Rank(); got != Critical.Rank() {
		t.Errorf("invalid Rank = %d, want Critical's", got)
	}
	if FromRank(-3) != Sheddable || FromRank(17) != CriticalPlus {
		t.Errorf("FromRank does not clamp")
	}
}

// TestCriticalitiesCopy checks that no caller can change levee's order of
// sacrifice: Criticalities returns a copy.
func TestCriticalitiesCopy(t *testing.T) {
	order := Criticalities()
	order[0] = CriticalPlus
	if got := Criticalities()[0]; got != Sheddable {
		t.Errorf("after changing a returned copy, Criticalities()[0] = %v, want SHEDDABLE", got)
	}
	if got := FromRank(0); got != Sheddable {
		t.Errorf("after changing a returned copy, FromRank(0) = %v, want SHEDDABLE", got)
	}
}

func TestParseCriticality(t *testing.T) {
	tests := []struct {
		in      string
		want    Criticality
		wantErr bool
	}{
		{"CRITICAL_PLUS", CriticalPlus, false},
		{"CRITICAL", Critical, false},
		{"SHEDDABLE_PLUS", SheddablePlus, false},
		{"SHEDDABLE", Sheddable, false},
		{"  sheddable ", Sheddable, false},
		{"Critical_Plus", CriticalPlus, false},
		{"4", CriticalPlus, false},
		{"3", Critical, false},
		{"2", SheddablePlus, false},
		{"1", Sheddable, false},
		{"0", Critical, true},
		{"5", Critical, true},
		{"", Critical, true},
		{"CRITICAL_PLUS_PLUS", Critical, true},
		{"CRITİCAL", Critical, true}, // dotted capital I is not ASCII I
		{"\x00CRITICAL", Critical, true},
		{strings.Repeat("A", 1<<16), Critical, true},
	}
	for _, tt := range tests {
		got, err := ParseCriticality(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseCriticality(%.20q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil {
			if !errors.Is(err, ErrBadCriticality) {
				t.Errorf("ParseCriticality(%.20q) error %v does not wrap ErrBadCriticality", tt.in, err)
			}
			if len(err.Error()) > 100 {
				t.Errorf("error message not bounded: %d bytes", len(err.Error()))
			}
		}
	}
}

func FuzzParseCriticality(f *testing.F) {
	for _, s := range []string{"CRITICAL", "SHEDDABLE_PLUS", "4", "1", "", "x", "critical_plus"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := ParseCriticality(s)
		if !c.Valid() {
			t.Fatalf("ParseCriticality(%q) returned invalid %d", s, c)
		}
		if err != nil {
			if c != Critical {
				t.Fatalf("ParseCriticality(%q) failed but returned %v, want the default CRITICAL", s, c)
			}
			return
		}
		// Round trip: the wire name parses back to the same level.
		back, err := ParseCriticality(c.String())
		if err != nil || back != c {
			t.Fatalf("round trip of %v: got %v, %v", c, back, err)
		}
	})
}

func TestCriticalityText(t *testing.T) {
	for _, c := range Criticalities() {
		b, err := c.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Criticality
		if err := back.UnmarshalText(b); err != nil || back != c {
			t.Errorf("text round trip of %v: %v, %v", c, back, err)
		}
	}
	if _, err := Criticality(7).MarshalText(); err == nil {
		t.Error("MarshalText of invalid value did not fail")
	}
	c := Sheddable
	if err := c.UnmarshalText([]byte("nope")); err == nil || c != Sheddable {
		t.Errorf("UnmarshalText(bad) = %v, left %v; want error and value unchanged", err, c)
	}
}

var ctxSink context.Context

func TestContext(t *testing.T) {
	ctx := context.Background()
	if got := CallFrom(ctx); got != (Call{}) {
		t.Errorf("empty ctx Call = %+v", got)
	}
	ctx = WithCriticality(ctx, Sheddable)
	ctx = WithTenant(ctx, "acme")
	ctx = WithAttempt(ctx, 2)
	want := Call{Criticality: Sheddable, Tenant: "acme", Attempt: 2}
	if got := CallFrom(ctx); got != want {
		t.Errorf("CallFrom = %+v, want %+v", got, want)
	}
	if CriticalityFrom(ctx) != Sheddable || TenantFrom(ctx) != "acme" || AttemptFrom(ctx) != 2 {
		t.Errorf("accessors disagree with CallFrom")
	}
	if got := CriticalityFrom(WithCriticality(ctx, Criticality(200))); got != Critical {
		t.Errorf("invalid criticality stored as %v, want CRITICAL", got)
	}
	if got := AttemptFrom(WithAttempt(ctx, -4)); got != 0 {
		t.Errorf("negative attempt stored as %d, want 0", got)
	}
	// The parent is not changed by a child's update.
	child := WithTenant(ctx, "other")
	if TenantFrom(ctx) != "acme" || TenantFrom(child) != "other" {
		t.Errorf("update leaked into the parent context")
	}
	allocs := testing.AllocsPerRun(100, func() { _ = CallFrom(ctx) })
	if allocs != 0 {
		t.Errorf("CallFrom allocates %v times, want 0", allocs)
	}
	bg := context.Background()
	allocs = testing.AllocsPerRun(100, func() { ctxSink = WithCall(bg, Call{Tenant: "x"}) })
	if allocs > 1 {
		t.Errorf("WithCall allocates %v times, want 1", allocs)
	}
	// Cancellation and deadlines pass through the Call's node.
	parent, cancel := context.WithCancel(context.Background())
	child, cancelChild := context.WithCancel(WithCall(parent, Call{Attempt: 1}))
	defer cancelChild()
	cancel()
	<-child.Done()
	if AttemptFrom(child) != 1 {
		t.Errorf("Call lost below a cancel node")
	}
	type otherKey struct{}
	v := WithCall(context.WithValue(context.Background(), otherKey{}, "v"), Call{})
	if v.Value(otherKey{}) != "v" {
		t.Errorf("other values are not passed through")
	}
}

func TestRejectedError(t *testing.T) {
	err := fmt.Errorf("calling backend: %w", &RejectedError{Reason: Overloaded, RetryAfter: 1500 * time.Millisecond})
	if !errors.Is(err, ErrOverloaded) {
		t.Error("errors.Is(wrapped overload, ErrOverloaded) = false")
	}
	if errors.Is(err, ErrQuota) || errors.Is(err, ErrDeadline) || errors.Is(err, ErrThrottled) {
		t.Error("overload matched another reason")
	}
	r := AsRejected(err)
	if r == nil || r.RetryAfter != 1500*time.Millisecond {
		t.Fatalf("AsRejected = %+v", r)
	}
	direct := error(&RejectedError{Reason: Quota})
	if allocs := testing.AllocsPerRun(100, func() { _ = AsRejected(direct) }); allocs != 0 {
		t.Errorf("AsRejected(*RejectedError) allocates %v times, want 0", allocs)
	}
	wrapped := fmt.Errorf("call: %w", direct)
	if allocs := testing.AllocsPerRun(100, func() { _ = AsRejected(wrapped) }); allocs != 0 {
		t.Errorf("AsRejected(wrapped) allocates %v times, want 0", allocs)
	}
	if AsRejected(nil) != nil {
		t.Error("AsRejected(nil) != nil")
	}
	if AsRejected(errors.New("plain")) != nil {
		t.Error("AsRejected(plain) != nil")
	}
	tests := []struct {
		e    RejectedError
		want string
	}{
		{RejectedError{Reason: Overloaded, NoRetry: true}, "levee: rejected: overloaded; no-retry"},
		{RejectedError{Reason: Quota, RetryAfter: 1500 * time.Millisecond}, "levee: rejected: quota; retry after 1.5s"},
		{RejectedError{Reason: Deadline}, "levee: rejected: deadline"},
		{RejectedError{Reason: Throttled}, "levee: rejected: throttled"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("Error() = %q, want %q", got, tt.want)
		}
	}
	for r := Overloaded; r <= Throttled; r++ {
		back, ok := ParseReason(r.String())
		if !ok || back != r {
			t.Errorf("ParseReason(%q) = %v, %v", r.String(), back, ok)
		}
	}
	if _, ok := ParseReason("overloaded; no-retry"); ok {
		t.Error("ParseReason accepted a reason with flags")
	}
	if got := Reason(0).String(); got != "Reason(0)" {
		t.Errorf("Reason(0).String() = %q", got)
	}
}

func TestCheckStage(t *testing.T) {
	now := time.Unix(1000, 0)
	ctx, cancel := context.WithDeadline(context.Background(), now.Add(100*time.Millisecond))
	defer cancel()
	tests := []struct {
		name string
		ctx  context.Context
		need time.Duration
		ok   bool
	}{
		{"no deadline", context.Background(), time.Hour, true},
		{"enough time", ctx, 50 * time.Millisecond, true},
		{"negative need", ctx, -time.Second, true},
		{"not enough", ctx, 100 * time.Millisecond, false},
		{"far too little", ctx, time.Second, false},
	}
	for _, tt := range tests {
		err := CheckStageAt(tt.ctx, tt.need, now)
		if (err == nil) != tt.ok {
			t.Errorf("%s: CheckStageAt = %v, want ok=%v", tt.name, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrDeadline) {
			t.Errorf("%s: error %v is not a deadline rejection", tt.name, err)
		}
	}
	done, cancelDone := context.WithCancel(context.Background())
	cancelDone()
	if err := CheckStageAt(done, 0, now); !errors.Is(err, ErrDeadline) {
		t.Errorf("cancelled ctx: CheckStageAt = %v, want deadline rejection", err)
	}
	if r := AsRejected(CheckStageAt(done, 0, now)); r == nil || !r.NoRetry {
		t.Errorf("stage deadline rejection should say no-retry: %+v", r)
	}
	allocs := testing.AllocsPerRun(100, func() { _ = CheckStageAt(ctx, time.Second, now) })
	if allocs != 0 {
		t.Errorf("CheckStageAt allocates %v times on rejection, want 0", allocs)
	}
}
