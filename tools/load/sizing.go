package load

import "math"

// Sizing turns one instance's capacity into a fleet: how many instances
// serve a peak with two to spare (N+2), and how many two sites need so
// that either one alone carries the whole peak when the other is lost.
type Sizing struct {
	// PeakRPS is the demand to plan for; PerInstanceRPS one instance's
	// capacity at its SLO (the knee).
	PeakRPS        float64 `json:"peak_rps"`
	PerInstanceRPS float64 `json:"per_instance_rps"`
	// N is the fewest instances that serve the peak: ⌈peak ÷ capacity⌉.
	N int `json:"n"`
	// NPlus2 is N + 2: the peak is still served with one instance down
	// for maintenance and another failing.
	NPlus2 int `json:"n_plus_2"`
	// PerSite is the instances each of two sites needs to carry the whole
	// peak alone: each site normally takes half of it and is sized for
	// twice that, ⌈2 · (peak ÷ 2) ÷ capacity⌉. TwoSites is the total, 2 ×
	// PerSite.
	PerSite  int `json:"per_site"`
	TwoSites int `json:"two_sites"`
}

// Size plans for peak requests per second with instances of perInstance
// requests per second each. Both must be positive; otherwise the zero
// Sizing is returned.
func Size(peak, perInstance float64) Sizing {
	if !(peak > 0) || !(perInstance > 0) || math.IsInf(peak, 0) || math.IsInf(perInstance, 0) {
		return Sizing{}
	}
	n := instances(peak, perInstance)
	perSite := instances(2*(peak/2), perInstance)
	return Sizing{
		PeakRPS: peak, PerInstanceRPS: perInstance,
		N: n, NPlus2: n + 2,
		PerSite: perSite, TwoSites: 2 * perSite,
	}
}

// instances is ⌈demand ÷ capacity⌉, tolerant of the rounding of a ratio
// that is a whole number.
func instances(demand, capacity float64) int {
	return int(math.Ceil(demand/capacity - 1e-9))
}

// Threshold is where to set levee's shedding for one instance, from the
// plan: the knee as a rate, and as the CPU utilisation the instance runs
// at there when the plan could measure it.
type Threshold struct {
	// RPS is the instance's capacity at its SLO: shed above it.
	RPS float64 `json:"rps"`
	// CPUTarget is the utilisation of the allowed cores at the knee,
	// rounded down to 0.01: the target of levee's CPU signal
	// (signals.cpu.target in levee's configuration,
	// pressure.WithCPUTarget in code) that starts shedding there. 0 when
	// unknown.
	CPUTarget float64 `json:"cpu_target,omitempty"`
}
