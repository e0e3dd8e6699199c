package overload

import (
	"strings"
	"testing"
	"time"
)

// TestThresholds: WithThresholds replaces a resource's own thresholds,
// in either order with WithResources, and ignores a name no resource
// has; Reconfigure changes the tunables from the next step, back to the
// defaults and the resources' own for what it does not set, and changes
// nothing on a bad option.
func TestThresholds(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	low := Thresholds{Enter: [3]float64{0.5, 0.6, 0.7}, Margin: 0.01}
	m := New(WithThresholds("memory", low), WithThresholds("goroutines", Thresholds{}), WithResources(mem.res))
	at := 0
	step := func(v float64) Level {
		mem.r = Reading{Value: v}
		at += 100
		m.Step(ms(at))
		return m.Level()
	}
	if l := step(0.65); l != High {
		t.Errorf("0.65 under thresholds 0.5/0.6/0.7: level %v, want high", l)
	}
	if got := m.Status().Resources[0].Enter; got != low.Enter {
		t.Errorf("status thresholds %v, want %v", got, low.Enter)
	}

	// Without WithThresholds the resource's own come back; the level in
	// course is re-read against them at the next step.
	if err := m.Reconfigure(WithAction(KeepAlive, Off), WithCooldown(Shed, 0)); err != nil {
		t.Fatal(err)
	}
	if l := step(0.65); l != Normal {
		t.Errorf("0.65 under the resource's own 0.8/0.9/0.95: level %v, want normal", l)
	}
	if l := step(0.91); l != High || m.State().Active[KeepAlive] {
		t.Errorf("0.91: level %v, keep-alive off %v; want high, and keep-alive left on (Off)", l, m.State().Active[KeepAlive])
	}
	if l := step(0.5); l != Normal || m.State().Active[Shed] {
		t.Errorf("0.5 with Shed's cooldown 0: level %v, shed %v; want normal and shed ended at once", l, m.State().Active[Shed])
	}

	// A bad option: an error, nothing changed.
	before := m.Status()
	for _, opt := range []Option{
		WithThresholds("memory", Thresholds{Enter: [3]float64{0.9, 0.8, 0}}),
		WithShedFloors(3, 2, 1),
		WithAction(Shed, 9),
	} {
		err := m.Reconfigure(WithThresholds("memory", low), opt)
		if err == nil || !strings.HasPrefix(err.Error(), "overload: ") {
			t.Errorf("Reconfigure with a bad option: %v, want an overload: error", err)
		}
	}
	if l := step(0.65); l != Normal {
		t.Errorf("after refused reconfigurations, 0.65: level %v, want normal (unchanged)", l)
	}
	if got := m.Status(); got.Actions[KeepAlive].Level != Off || got.Resources[0].Enter != before.Resources[0].Enter {
		t.Errorf("after refused reconfigurations: keep-alive level %v, thresholds %v; want off, %v",
			got.Actions[KeepAlive].Level, got.Resources[0].Enter, before.Resources[0].Enter)
	}
}

// TestReconfigureKeepsWhatItIsBuiltFrom: resources, period and shedder
// stay as New set them.
func TestReconfigureKeepsWhatItIsBuiltFrom(t *testing.T) {
	mem := newScripted("memory", [3]float64{0.8, 0.9, 0.95}, 0)
	var sh fakeShedder
	m := New(WithResources(mem.res), WithShedder(&sh), WithPeriod(time.Second))
	other := newScripted("other", [3]float64{0.1, 0.2, 0.3}, 0)
	if err := m.Reconfigure(WithResources(other.res), WithPeriod(10*time.Millisecond), WithShedder(nil)); err != nil {
		t.Fatal(err)
	}
	mem.r = Reading{Value: 0.85}
	m.Step(ms(0))
	if m.Period() != time.Second || len(m.Status().Resources) != 1 || sh.calls != 1 {
		t.Errorf("after Reconfigure: period %v, %d resources, %d shedder calls; want 1s, 1, 1", m.Period(), len(m.Status().Resources), sh.calls)
	}
	if until := sh.until.Sub(ms(0)); until != 3*time.Second {
		t.Errorf("shed floor expiry %v ahead, want 3s (3 periods of 1s)", until)
	}
}
