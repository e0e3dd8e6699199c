package overload

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"strconv"
	"time"

	"github.com/levee-dev/levee"
)

// EventKind says what changed.
type EventKind uint8

// The kinds of change.
const (
	// LevelChanged: the level moved (Event.From → Event.Level), driven by
	// Event.Resource's reading Event.Value (none when back at Normal).
	LevelChanged EventKind = iota + 1
	// ActionStarted: Event.Action became active at Event.Level.
	ActionStarted
	// ActionEnded: Event.Action ended after Event.Active.
	ActionEnded
)

var eventNames = [...]string{"", "level_changed", "action_started", "action_ended"}

// String returns "level_changed", "action_started" or "action_ended".
func (k EventKind) String() string {
	if k != 0 && int(k) < len(eventNames) {
		return eventNames[k]
	}
	return "EventKind(" + strconv.Itoa(int(k)) + ")"
}

// Event is one change, reported once (logged, and given to the
// observer).
type Event struct {
	Time time.Time
	Kind EventKind
	// Level is the level after the change; From the level before (for
	// LevelChanged).
	Level, From Level
	// Resource and Value name the resource at the new level and its
	// reading (LevelChanged above Normal).
	Resource string
	Value    float64
	// Action is the action that started or ended.
	Action Action
	// Active is how long the action was active (ActionEnded).
	Active time.Duration
}

// emit logs events and gives them to the observer, in order.
func (m *Manager) emit(events []Event) {
	for _, e := range events {
		if l := m.cfg.logger; l != nil {
			ctx := context.Background()
			switch e.Kind {
			case LevelChanged:
				attrs := []any{"from", e.From.String()}
				if e.Resource != "" {
					attrs = append(attrs, "resource", e.Resource, "value", e.Value)
				}
				l.Log(ctx, slog.LevelWarn, "overload: level "+e.Level.String(), attrs...)
			case ActionStarted:
				l.Log(ctx, slog.LevelWarn, "overload: "+e.Action.String()+" started", "level", e.Level.String())
			case ActionEnded:
				l.Log(ctx, slog.LevelInfo, "overload: "+e.Action.String()+" ended", "active", e.Active.String())
			}
		}
		if m.cfg.observer != nil {
			m.cfg.observer(e)
		}
	}
}

// Status is the Manager's state for the status page and the metrics:
// each resource against its limit, each action's state and time active.
// It encodes as JSON with snake_case names, levels and actions by name,
// and null for a missing reading.
type Status struct {
	// Time of the last step; Level its level, entered at LevelSince.
	Time       time.Time
	Level      Level
	LevelSince time.Time
	// Resources holds each resource's latest reading, in the order given.
	Resources []ResourceStatus
	// Actions holds every action, indexed by Action.
	Actions [NumActions]ActionStatus
	// InFlight is the requests in flight now; Cap the InFlight cap for
	// CRITICAL requests (0: none).
	InFlight, Cap int64
	// Refused counts the requests refused since New, by verdict and
	// criticality (Refused[RefuseInFlight][levee.Sheddable]); the row of
	// Pass stays 0.
	Refused [numVerdicts][levee.NumCriticalities]uint64
	// Collections counts the garbage collections the Collect action
	// forced.
	Collections uint64
}

// ResourceStatus is one resource's latest reading.
type ResourceStatus struct {
	Name, Unit string
	// Value is the reading against the thresholds (NaN: none, or too
	// old); Used and Limit its figures in Unit (0: unknown).
	Value, Used, Limit float64
	// Level is the level the resource puts the process at.
	Level Level
	// Enter holds its thresholds for Elevated, High and Critical; Goal
	// the reading the InFlight action steers it to (0: none).
	Enter [NumLevels - 1]float64
	Goal  float64
	// Time is when it was read.
	Time time.Time
}

// ActionStatus is one action's state.
type ActionStatus struct {
	Action Action
	// Level is the level it starts at (Off: disabled).
	Level  Level
	Active bool
	// Since is when it last started (zero if never).
	Since time.Time
	// ActiveSeconds is the total time it has been active.
	ActiveSeconds float64
}

// Status returns the state at the last step, with the requests in flight
// and the refusals read now.
func (m *Manager) Status() Status {
	m.mu.Lock()
	s := Status{Time: m.state.Time, Level: m.level, LevelSince: m.since, Cap: m.state.Cap}
	for _, rs := range m.res {
		s.Resources = append(s.Resources, ResourceStatus{
			Name: rs.r.Name, Unit: rs.r.Unit, Value: rs.value, Used: rs.reading.Used, Limit: rs.reading.Limit,
			Level: rs.level, Enter: rs.r.Enter, Goal: rs.r.Goal, Time: rs.reading.Time,
		})
	}
	for a := range Action(NumActions) {
		s.Actions[a] = ActionStatus{Action: a, Level: m.cfg.actions[a].level, Active: m.active[a],
			Since: m.started[a], ActiveSeconds: m.activeFor[a].Seconds()}
	}
	m.mu.Unlock()
	s.InFlight = m.InFlight()
	for v := range s.Refused {
		for c := range s.Refused[v] {
			s.Refused[v][c] = m.refused[v][c].Load()
		}
	}
	s.Collections = m.collections.Load()
	return s
}

// MarshalText returns the level's name (String).
func (l Level) MarshalText() ([]byte, error) { return []byte(l.String()), nil }

// MarshalText returns the action's name (String).
func (a Action) MarshalText() ([]byte, error) { return []byte(a.String()), nil }

// number encodes NaN and infinities as null.
type number float64

func (n number) MarshalJSON() ([]byte, error) {
	if math.IsNaN(float64(n)) || math.IsInf(float64(n), 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, float64(n), 'g', -1, 64), nil
}

// MarshalJSON encodes the status with snake_case names; refusals are
// keyed by verdict and criticality name.
func (s Status) MarshalJSON() ([]byte, error) {
	type resource struct {
		Name  string     `json:"name"`
		Unit  string     `json:"unit,omitempty"`
		Value number     `json:"value"`
		Used  number     `json:"used"`
		Limit number     `json:"limit"`
		Level Level      `json:"level"`
		Enter [3]number  `json:"enter"`
		Goal  number     `json:"goal"`
		Time  *time.Time `json:"time,omitempty"`
	}
	type action struct {
		Action        Action     `json:"action"`
		Level         Level      `json:"level"`
		Active        bool       `json:"active"`
		Since         *time.Time `json:"since,omitempty"`
		ActiveSeconds number     `json:"active_seconds"`
	}
	out := struct {
		Time        time.Time                    `json:"time"`
		Level       Level                        `json:"level"`
		LevelSince  *time.Time                   `json:"level_since,omitempty"`
		Resources   []resource                   `json:"resources"`
		Actions     []action                     `json:"actions"`
		InFlight    int64                        `json:"in_flight"`
		Cap         int64                        `json:"in_flight_cap"`
		Refused     map[string]map[string]uint64 `json:"refused"`
		Collections uint64                       `json:"collections"`
	}{Time: s.Time, Level: s.Level, LevelSince: timePtr(s.LevelSince), InFlight: s.InFlight, Cap: s.Cap,
		Resources: []resource{}, Refused: map[string]map[string]uint64{}, Collections: s.Collections}
	for _, r := range s.Resources {
		out.Resources = append(out.Resources, resource{Name: r.Name, Unit: r.Unit, Value: number(r.Value),
			Used: number(r.Used), Limit: number(r.Limit), Level: r.Level,
			Enter: [3]number{number(r.Enter[0]), number(r.Enter[1]), number(r.Enter[2])}, Goal: number(r.Goal), Time: timePtr(r.Time)})
	}
	for _, a := range s.Actions {
		out.Actions = append(out.Actions, action{Action: a.Action, Level: a.Level, Active: a.Active,
			Since: timePtr(a.Since), ActiveSeconds: number(a.ActiveSeconds)})
	}
	for _, v := range Refusals() {
		byCrit := map[string]uint64{}
		for _, c := range levee.Criticalities() {
			byCrit[c.String()] = s.Refused[v][c]
		}
		out.Refused[v.String()] = byCrit
	}
	return json.Marshal(out)
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}
