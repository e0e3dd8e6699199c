package admit

// Stage names the part of the controller that rejected a request as
// Overloaded (Snapshot.Shed): the order of sacrifice says which stage
// may shed what, and an operator checking it needs to tell them apart.
type Stage uint8

// The stages, in the order a request meets them.
const (
	// StageTenant: the excess of a tenant (or a group of tenants) far
	// above its fair share, cut whatever its criticality, its own lowest
	// criticalities first.
	StageTenant Stage = iota + 1
	// StageLadder: the ladder over criticalities, lowest first (and the
	// surge bound before shedding starts, which follows it).
	StageLadder
	// StageForced: a criticality shed because a forced shed level (a
	// drill's ForceShed or an overload manager's OverloadShed, the higher
	// in force) asks for more of it than the ladder would shed.
	StageForced
	// StageRunQueue: a request that waited in the run queue
	// (Ticket.Wait) longer than it allows, whatever its criticality.
	StageRunQueue
	// StageExternal: a rejection decided outside the controller and
	// counted with CountRejected (an overload manager's request gate).
	StageExternal
	// NumStages sizes arrays indexed by Stage (index 0 unused).
	NumStages = int(StageExternal) + 1
)

var stageNames = [NumStages]string{"", "tenant", "ladder", "forced", "run_queue", "external"}

// String returns the stage's name as metrics label it: "tenant",
// "ladder", "forced", "run_queue" or "external"; "" for anything else.
func (s Stage) String() string {
	if int(s) < NumStages {
		return stageNames[s]
	}
	return ""
}
