package sim

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/levee-dev/levee"
	"github.com/levee-dev/levee/throttle"
)

// Report is the outcome of a scenario, in the report vocabulary of
// DESIGN.md. Encoded with encoding/json it is byte-identical for the same
// scenario and seed.
type Report struct {
	Scenario    string  `json:"scenario"`
	Description string  `json:"description,omitempty"`
	Seed        uint64  `json:"seed"`
	DurationS   float64 `json:"duration_s"`
	// Trigger names the phase after which recovery is measured.
	Trigger string      `json:"trigger,omitempty"`
	Runs    []RunResult `json:"runs"`
	// KTable is the throttle scenario's K sweep.
	KTable []KRow `json:"k_table,omitempty"`
	// AmplificationTable is the amplification scenario's table.
	AmplificationTable []AmpRow `json:"amplification_table,omitempty"`
}

// RunResult is one run of a scenario.
type RunResult struct {
	Name       string `json:"name"`
	Protection string `json:"protection"`
	// Throttle says whether clients throttled adaptively.
	Throttle bool `json:"throttle"`
	// CapacityRPS is the capacity of the instances meant to serve.
	CapacityRPS float64       `json:"capacity_rps"`
	Phases      []PhaseResult `json:"phases"`
	// Crashes counts the crashes the load caused (memory, health checks);
	// CrashEvents lists every crash, the scenario's own included, with
	// when, where and why.
	Crashes     int     `json:"crashes"`
	CrashEvents []Crash `json:"crash_events"`
	// OutageS is the number of seconds with goodput below 10% of offered.
	OutageS float64 `json:"outage_s"`
	// RecoveryS runs from the end of the trigger phase until goodput is at
	// least 95% of the pre-trigger goodput for 3 consecutive seconds; null
	// if it never is, or the scenario has no trigger.
	RecoveryS *float64 `json:"recovery_s"`
	// WastedWorkShare is the share of the servers' CPU time spent on work
	// whose caller had already gone (timed out, or lost in a crash).
	WastedWorkShare float64 `json:"wasted_work_share"`
	// RejectCPUShare is the share of the servers' CPU time spent rejecting
	// requests (levee's rejections are cheap).
	RejectCPUShare float64 `json:"reject_cpu_share"`
	// SimulatedRequests counts the attempts sent to a tier's load
	// balancer (retries included, local throttling excluded).
	SimulatedRequests int64            `json:"simulated_requests"`
	Tiers             []TierResult     `json:"tiers"`
	Instances         []InstanceResult `json:"instances"`
	Series            Series           `json:"series"`
}

// PhaseResult gives a phase's mean rates (per second of the phase).
type PhaseResult struct {
	Name         string  `json:"name"`
	StartS       float64 `json:"start_s"`
	EndS         float64 `json:"end_s"`
	OfferedRPS   float64 `json:"offered_rps"`
	AttemptedRPS float64 `json:"attempted_rps"`
	ThrottledRPS float64 `json:"throttled_rps"`
	GoodputRPS   float64 `json:"goodput_rps"`
	RejectedRPS  float64 `json:"rejected_rps"`
	FailedRPS    float64 `json:"failed_rps"`
	// ByCriticality gives offered and goodput per criticality, for the
	// criticalities that were offered.
	ByCriticality []CritResult `json:"by_criticality,omitempty"`
	// MeanLatencyS is the mean latency of successful requests, from their
	// creation (the scheduled send time) to the final response.
	MeanLatencyS float64 `json:"mean_latency_s"`
}

// CritResult is one criticality's share of a phase.
type CritResult struct {
	Criticality string  `json:"criticality"`
	OfferedRPS  float64 `json:"offered_rps"`
	GoodputRPS  float64 `json:"goodput_rps"`
}

// Crash is one crash event.
type Crash struct {
	T        float64 `json:"t_s"`
	Instance string  `json:"instance"`
	// Kind is "memory" (in-flight over the memory limit), "health-check"
	// (killed for being slow) or "event" (scenario).
	Kind  string `json:"kind"`
	Cause string `json:"cause"`
	// ArrivalsRPS is the attempts that reached the instance in the second
	// before the crash; Inflight its in-flight requests when it crashed.
	ArrivalsRPS int `json:"arrivals_last_s"`
	Inflight    int `json:"inflight"`
}

// TierResult is what reached a tier.
type TierResult struct {
	Name         string  `json:"name"`
	ReceivedRPS  float64 `json:"received_rps"`
	PeakRecvRPS  float64 `json:"peak_received_rps"`
	Instances    int     `json:"instances"`
	Protected    bool    `json:"protected"`
	ReceivedReqs int64   `json:"received"`
}

// InstanceResult is one instance's totals.
type InstanceResult struct {
	Name     string `json:"name"`
	Site     string `json:"site,omitempty"`
	Received int64  `json:"received"`
	Served   int64  `json:"served"`
	Rejected int64  `json:"rejected"`
	// RejectedBy counts admit's rejections by reason.
	RejectedBy   map[string]int64 `json:"rejected_by,omitempty"`
	PeakRecvRPS  float64          `json:"peak_received_rps"`
	PeakInflight int              `json:"peak_inflight"`
	Crashes      int              `json:"crashes"`
}

// Series are the run's rates per bucket, for charts.
type Series struct {
	BucketS   float64          `json:"bucket_s"`
	Offered   []float64        `json:"offered_rps"`
	Attempted []float64        `json:"attempted_rps"`
	Throttled []float64        `json:"throttled_rps"`
	Goodput   []float64        `json:"goodput_rps"`
	Rejected  []float64        `json:"rejected_rps"`
	Failed    []float64        `json:"failed_rps"`
	Instances []InstanceSeries `json:"instances"`
}

// InstanceSeries is one instance's state per bucket.
type InstanceSeries struct {
	Name        string    `json:"name"`
	ReceivedRPS []float64 `json:"received_rps"`
	ServedRPS   []float64 `json:"served_rps"`
	RejectedRPS []float64 `json:"rejected_rps"`
	Utilisation []float64 `json:"utilisation"`
	Inflight    []float64 `json:"peak_inflight"`
	// QueueDelayS is the worst mean wait for a core over the bucket's
	// control periods, seconds.
	QueueDelayS []float64 `json:"queue_delay_s"`
	// State: 0 up, 1 cold (warming up), 2 down.
	State []int `json:"state"`
}

// KRow is one K of the throttle scenario.
type KRow struct {
	K float64 `json:"k"`
	// BackendProcessedFraction is processed ÷ received at the backend.
	BackendProcessedFraction float64 `json:"backend_processed_fraction"`
	// LocalRejectFraction is the clients' local rejections ÷ requests.
	LocalRejectFraction float64 `json:"local_reject_fraction"`
	// Expected values: the throttle package's own virtual-time run
	// (throttle.Simulate) at the same demand, backend acceptance rate and
	// queue depth.
	ExpectedBackendProcessedFraction float64 `json:"expected_backend_processed_fraction"`
	ExpectedLocalRejectFraction      float64 `json:"expected_local_reject_fraction"`
	// Formula values: the SRE formula's steady state (throttle.Formula).
	FormulaBackendProcessedFraction float64 `json:"formula_backend_processed_fraction"`
	FormulaLocalRejectFraction      float64 `json:"formula_local_reject_fraction"`
	// Overload is offered ÷ what the backend accepted.
	Overload float64 `json:"overload"`
}

// AmpRow is one chain of the amplification scenario.
type AmpRow struct {
	Layers          int    `json:"layers"`
	RetriesPerLayer int    `json:"retries_per_layer"`
	Protection      string `json:"protection"`
	// Amplification is the attempts reaching the bottom tier ÷ requests
	// offered at the top.
	Amplification float64 `json:"amplification"`
}

func hasMix(r *Report) bool {
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			if len(p.ByCriticality) > 1 {
				return true
			}
		}
	}
	return false
}

func round3(x float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return math.Round(x*1000) / 1000
}

func (w *world) result() RunResult {
	s := w.s
	bs := float64(w.bucket) / 1e9
	r := RunResult{
		Name:              w.run.Name,
		Protection:        w.run.Protection,
		Throttle:          w.thr,
		CapacityRPS:       w.capacity(),
		CrashEvents:       w.crashes,
		SimulatedRequests: w.requests,
	}
	if r.CrashEvents == nil {
		r.CrashEvents = []Crash{}
	}
	for _, c := range w.crashes {
		if c.Kind != "event" {
			r.Crashes++
		}
	}
	if w.busyAll > 0 {
		r.WastedWorkShare = round3(float64(w.wasted) / float64(w.busyAll))
		r.RejectCPUShare = round3(float64(w.rejectCPU) / float64(w.busyAll))
	}
	var start int64
	for i, p := range s.Phases {
		end := w.phaseEnd[i]
		b0, b1 := int(start/w.bucket), int((end+w.bucket-1)/w.bucket)
		b1 = min(b1, w.nb)
		d := float64(end-start) / 1e9
		sum := func(x []int64) float64 {
			var t int64
			for b := b0; b < b1; b++ {
				t += x[b]
			}
			return round3(float64(t) / d)
		}
		var lat float64
		var good int64
		for b := b0; b < b1; b++ {
			lat += w.latSum[b]
			good += w.goodput[b]
		}
		pr := PhaseResult{
			Name: p.Name, StartS: round3(float64(start) / 1e9), EndS: round3(float64(end) / 1e9),
			OfferedRPS: sum(w.offered), AttemptedRPS: sum(w.attempted), ThrottledRPS: sum(w.throttled),
			GoodputRPS: sum(w.goodput), RejectedRPS: sum(w.rejected), FailedRPS: sum(w.failed),
		}
		if good > 0 {
			pr.MeanLatencyS = round3(lat / float64(good))
		}
		for _, cr := range levee.ByRank {
			if w.critOffered[i][cr] == 0 {
				continue
			}
			pr.ByCriticality = append(pr.ByCriticality, CritResult{
				Criticality: cr.String(),
				OfferedRPS:  round3(float64(w.critOffered[i][cr]) / d),
				GoodputRPS:  round3(float64(w.critGood[i][cr]) / d),
			})
		}
		r.Phases = append(r.Phases, pr)
		start = end
	}
	// outage: seconds with goodput < 10% of offered (skip empty buckets)
	var outage float64
	for b := 0; b < w.nb; b++ {
		if w.offered[b] > 0 && float64(w.goodput[b]) < 0.1*float64(w.offered[b]) {
			outage += bs
		}
	}
	r.OutageS = round3(outage)
	r.RecoveryS = w.recovery()
	conv := func(x []int64) []float64 {
		out := make([]float64, len(x))
		for i, v := range x {
			out[i] = round3(float64(v) / bs)
		}
		return out
	}
	r.Series = Series{
		BucketS: round3(bs),
		Offered: conv(w.offered), Attempted: conv(w.attempted), Throttled: conv(w.throttled),
		Goodput: conv(w.goodput), Rejected: conv(w.rejected), Failed: conv(w.failed),
	}
	for _, t := range w.tiers {
		var tot, peak int64
		for _, v := range t.recv {
			tot += v
			peak = max(peak, v)
		}
		r.Tiers = append(r.Tiers, TierResult{
			Name: t.cfg.Name, ReceivedRPS: round3(float64(tot) / (float64(w.end) / 1e9)),
			PeakRecvRPS: round3(float64(peak) / bs), Instances: len(t.insts), Protected: t.protect, ReceivedReqs: tot,
		})
	}
	for _, in := range w.insts {
		ir := InstanceResult{Name: in.name, Site: in.site, PeakInflight: in.peakInflight, Crashes: in.crashes}
		for r, n := range in.byReason {
			if n > 0 {
				if ir.RejectedBy == nil {
					ir.RejectedBy = map[string]int64{}
				}
				ir.RejectedBy[levee.Reason(r).String()] = n
			}
		}
		is := InstanceSeries{Name: in.name}
		var peak int32
		for b := 0; b < w.nb; b++ {
			ir.Received += int64(in.recv[b])
			ir.Served += int64(in.served[b])
			ir.Rejected += int64(in.rejected[b])
			peak = max(peak, in.recv[b])
			is.ReceivedRPS = append(is.ReceivedRPS, round3(float64(in.recv[b])/bs))
			is.ServedRPS = append(is.ServedRPS, round3(float64(in.served[b])/bs))
			is.RejectedRPS = append(is.RejectedRPS, round3(float64(in.rejected[b])/bs))
			is.Utilisation = append(is.Utilisation, round3(float64(in.util[b])))
			is.Inflight = append(is.Inflight, float64(in.inflightMax[b]))
			is.QueueDelayS = append(is.QueueDelayS, round3(float64(in.qdMax[b])))
			is.State = append(is.State, int(in.state[b]))
		}
		ir.PeakRecvRPS = round3(float64(peak) / bs)
		r.Instances = append(r.Instances, ir)
		r.Series.Instances = append(r.Series.Instances, is)
	}
	return r
}

// capacity is the configured capacity, or the nominal capacity of the
// capacity tier: cores ÷ mean service time, summed over its instances.
func (w *world) capacity() float64 {
	if w.s.CapacityRPS > 0 {
		return w.s.CapacityRPS
	}
	t := w.byName[w.s.CapacityTier]
	if t == nil {
		return 0
	}
	cores := 0
	for _, in := range t.insts {
		cores += in.cores
	}
	return round3(float64(cores) / (t.meanSvc / 1e9))
}

func (w *world) recovery() *float64 {
	s := w.s
	if s.Trigger == "" {
		return nil
	}
	var trigStart, trigEnd int64
	for i, p := range s.Phases {
		if p.Name == s.Trigger {
			trigEnd = w.phaseEnd[i]
			trigStart = trigEnd - int64(p.Duration)
			break
		}
	}
	// pre-trigger goodput: mean over the 10 s (or less) before the trigger
	b1 := int(trigStart / w.bucket)
	b0 := max(0, b1-int(int64(10*time.Second)/w.bucket))
	if b1 <= b0 {
		return nil
	}
	var pre float64
	for b := b0; b < b1; b++ {
		pre += float64(w.goodput[b])
	}
	pre /= float64(b1 - b0)
	need := int((int64(3*time.Second) + w.bucket - 1) / w.bucket)
	run := 0
	for b := int(trigEnd / w.bucket); b < w.nb; b++ {
		if float64(w.goodput[b]) >= 0.95*pre {
			run++
			if run >= need {
				rec := round3(float64(int64(b-need+1)*w.bucket-trigEnd) / 1e9)
				rec = max(rec, 0)
				return &rec
			}
		} else {
			run = 0
		}
	}
	return nil
}

// kTable compares, for each K, what the simulated backend processed and
// what the clients rejected locally with the throttle package's own
// numbers, computed by driving a real Throttle on virtual time at the
// same demand and acceptance rate.
func kTable(s *Scenario, rep *Report) []KRow {
	var rows []KRow
	last := len(s.Phases) - 1
	for i, r := range rep.Runs {
		k := s.Runs[i].ThrottleK
		if k == 0 {
			k = s.Clients[0].ThrottleK
		}
		p := r.Phases[last]
		var recv, served float64
		for _, in := range r.Instances {
			recv += float64(in.Received)
			served += float64(in.Served)
		}
		// over the last phase only
		recv, served = 0, 0
		b0 := int(p.StartS / r.Series.BucketS)
		for _, is := range r.Series.Instances {
			for b := b0; b < len(is.ReceivedRPS); b++ {
				recv += is.ReceivedRPS[b]
				served += is.ServedRPS[b]
			}
		}
		row := KRow{K: k}
		if recv > 0 {
			row.BackendProcessedFraction = round3(served / recv)
		}
		if p.OfferedRPS > 0 {
			row.LocalRejectFraction = round3(p.ThrottledRPS / p.OfferedRPS)
		}
		n := float64(len(r.Series.Instances[0].ReceivedRPS) - b0)
		acceptRPS := served / n
		if acceptRPS > 0 {
			load := p.OfferedRPS / acceptRPS
			row.Overload = round3(load)
			// The throttle package's own virtual-time run at the same
			// demand, acceptance rate and backend queue depth.
			bt := s.Tiers[len(s.Tiers)-1]
			st := throttle.Simulate(throttle.Scenario{
				K: k, Load: load, Capacity: acceptRPS,
				Warmup:  s.Duration() - s.Phases[last].Duration.D(),
				Measure: s.Phases[last].Duration.D(),
				Burst:   time.Duration(float64(bt.Queue+bt.Cores) / acceptRPS * float64(time.Second)),
				Poisson: true, Seed: rep.Seed,
			})
			row.ExpectedBackendProcessedFraction = round3(1 - st.BackendReject)
			row.ExpectedLocalRejectFraction = round3(st.LocalReject)
			f := throttle.Formula(k, load)
			row.FormulaBackendProcessedFraction = round3(1 - f.BackendReject)
			row.FormulaLocalRejectFraction = round3(f.LocalReject)
		}
		rows = append(rows, row)
	}
	return rows
}

func ampTable(s *Scenario, jobs []runJob, rep *Report) []AmpRow {
	measure := s.Amplification.Measure
	var rows []AmpRow
	for i, j := range jobs {
		r := rep.Runs[i]
		// bottom tier = last tier; measured over the measure phase
		pi := len(s.Phases) - 1
		for k, p := range s.Phases {
			if p.Name == measure {
				pi = k
			}
		}
		p := r.Phases[pi]
		b0, b1 := int(p.StartS/r.Series.BucketS), int(math.Ceil(p.EndS/r.Series.BucketS))
		var bottom float64
		bt := j.s.Tiers[len(j.s.Tiers)-1].Name
		for k, in := range r.Instances {
			if !strings.HasPrefix(in.Name, bt+"-") {
				continue
			}
			for b := b0; b < b1 && b < len(r.Series.Instances[k].ReceivedRPS); b++ {
				bottom += r.Series.Instances[k].ReceivedRPS[b]
			}
		}
		var offered float64
		for b := b0; b < b1 && b < len(r.Series.Offered); b++ {
			offered += r.Series.Offered[b]
		}
		row := AmpRow{Layers: j.run.Layers, RetriesPerLayer: s.Amplification.RetriesPerLayer, Protection: j.run.Protection}
		if offered > 0 {
			row.Amplification = round3(bottom / offered)
		}
		rows = append(rows, row)
	}
	return rows
}

// WriteTable writes the report as readable text tables.
func (r *Report) WriteTable(out io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "scenario %s (seed %d, %.0fs of virtual time)\n", r.Scenario, r.Seed, r.DurationS)
	if r.Description != "" {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(r.Description))
	}
	b.WriteString("\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tphase\toffered/s\tattempted/s\tthrottled/s\tgoodput/s\trejected/s\tfailed/s\tlatency s\t")
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.3f\t\n", run.Name, p.Name,
				p.OfferedRPS, p.AttemptedRPS, p.ThrottledRPS, p.GoodputRPS, p.RejectedRPS, p.FailedRPS, p.MeanLatencyS)
		}
	}
	tw.Flush()
	b.WriteString("\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tprotection\tcapacity/s\tcrashes\toutage s\trecovery s\twasted work\trejecting\tpeak recv/s (per instance)\t")
	for _, run := range r.Runs {
		rec := "-"
		if run.RecoveryS != nil {
			rec = fmt.Sprintf("%.1f", *run.RecoveryS)
		} else if r.Trigger != "" {
			rec = "never"
		}
		var peaks []string
		for _, in := range run.Instances {
			peaks = append(peaks, fmt.Sprintf("%s %.0f", in.Name, in.PeakRecvRPS))
		}
		if len(peaks) > 4 {
			peaks = append(peaks[:4], "…")
		}
		fmt.Fprintf(tw, "%s\t%s\t%.0f\t%d\t%.0f\t%s\t%.1f%%\t%.1f%%\t%s\t\n", run.Name, run.Protection, run.CapacityRPS,
			run.Crashes, run.OutageS, rec, 100*run.WastedWorkShare, 100*run.RejectCPUShare, strings.Join(peaks, ", "))
	}
	tw.Flush()
	if hasMix(r) {
		b.WriteString("\ngoodput ÷ offered per criticality (shed first → last):\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprint(tw, "run\tphase\t")
		for _, cr := range levee.ByRank {
			fmt.Fprintf(tw, "%s\t", cr)
		}
		fmt.Fprintln(tw)
		for _, run := range r.Runs {
			for _, p := range run.Phases {
				fmt.Fprintf(tw, "%s\t%s\t", run.Name, p.Name)
				for _, cr := range levee.ByRank {
					cell := "-"
					for _, x := range p.ByCriticality {
						if x.Criticality == cr.String() && x.OfferedRPS > 0 {
							cell = fmt.Sprintf("%.0f%%", 100*x.GoodputRPS/x.OfferedRPS)
						}
					}
					fmt.Fprintf(tw, "%s\t", cell)
				}
				fmt.Fprintln(tw)
			}
		}
		tw.Flush()
	}
	for _, run := range r.Runs {
		if len(run.CrashEvents) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\ncrashes in %s:\n", run.Name)
		for i, c := range run.CrashEvents {
			if i == 8 {
				fmt.Fprintf(&b, "  … %d more\n", len(run.CrashEvents)-i)
				break
			}
			fmt.Fprintf(&b, "  t=%6.2fs %-12s %s\n", c.T, c.Instance, c.Cause)
		}
	}
	if len(r.KTable) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "K\toverload\tbackend processed\tthrottle.Simulate\tformula\tlocal rejects\tthrottle.Simulate\tformula\t")
		for _, k := range r.KTable {
			fmt.Fprintf(tw, "%.1f\t%.1f×\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t%.1f%%\t\n", k.K, k.Overload,
				100*k.BackendProcessedFraction, 100*k.ExpectedBackendProcessedFraction, 100*k.FormulaBackendProcessedFraction,
				100*k.LocalRejectFraction, 100*k.ExpectedLocalRejectFraction, 100*k.FormulaLocalRejectFraction)
		}
		tw.Flush()
	}
	if len(r.AmplificationTable) > 0 {
		b.WriteString("\n")
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "retrying layers\tretries each\tprotection\tamplification\t")
		for _, a := range r.AmplificationTable {
			fmt.Fprintf(tw, "%d\t%d\t%s\t×%.2f\t\n", a.Layers, a.RetriesPerLayer, a.Protection, a.Amplification)
		}
		tw.Flush()
	}
	_, err := io.WriteString(out, b.String())
	return err
}
