package levee_test

import (
	"context"
	"testing"

	"github.com/levee-dev/levee"
)

type nopPauser struct{}

func (nopPauser) Pause()   {}
func (nopPauser) Unpause() {}

// TestPauserFrom: a Pauser put in a context is found through other
// context nodes; nil hides an outer one; a context without any gives nil,
// without allocating.
func TestPauserFrom(t *testing.T) {
	p := nopPauser{}
	ctx := levee.WithCall(levee.WithPauser(context.Background(), p), levee.Call{Tenant: "t"})
	if got := levee.PauserFrom(ctx); got != p {
		t.Errorf("PauserFrom = %v; want the Pauser put in", got)
	}
	if got := levee.PauserFrom(levee.WithPauser(ctx, nil)); got != nil {
		t.Errorf("PauserFrom under WithPauser(nil) = %v; want nil", got)
	}
	bg := context.Background()
	if allocs := testing.AllocsPerRun(100, func() {
		if levee.PauserFrom(bg) != nil {
			t.Error("a Pauser in context.Background")
		}
	}); allocs != 0 {
		t.Errorf("PauserFrom allocates %v times; want 0", allocs)
	}
}
