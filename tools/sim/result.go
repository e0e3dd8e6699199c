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
	"github.com/levee-dev/levee/tools/report"
)

// Report is the outcome of a scenario: the one report schema of levee's
// tools (package report) and, for the throttle and amplification
// scenarios, their tables. Encoded with encoding/json it is byte-identical
// for the same scenario and seed.
type Report struct {
	report.Report
	// KTable is the throttle scenario's K sweep.
	KTable []KRow `json:"k_table,omitempty"`
	// AmplificationTable is the amplification scenario's table.
	AmplificationTable []AmpRow `json:"amplification_table,omitempty"`
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

func (w *world) result() report.Run {
	s := w.s
	bs := float64(w.bucket) / 1e9
	r := report.Run{
		Name:        w.run.Name,
		Protection:  w.run.Protection,
		Throttle:    w.thr,
		CapacityRPS: w.capacity(),
		CrashEvents: w.crashes,
		Attempts:    w.requests,
	}
	for _, c := range w.crashes {
		if c.Kind != "event" {
			r.Crashes++
		}
	}
	r.WastedWorkShare = report.Share(float64(w.wasted), float64(w.busyAll))
	r.RejectCPUShare = report.Share(float64(w.rejectCPU), float64(w.busyAll))
	tallies := make([]report.Tally, w.nb)
	for b := range tallies {
		tallies[b] = report.Tally{
			Offered: w.offered[b], Attempted: w.attempted[b], Throttled: w.throttled[b],
			Goodput: w.goodput[b], Rejected: w.rejected[b], Failed: w.failed[b],
		}
	}
	var start int64
	for i, p := range s.Phases {
		end := w.phaseEnd[i]
		b0, b1 := int(start/w.bucket), min(int((end+w.bucket-1)/w.bucket), w.nb)
		d := float64(end-start) / 1e9
		var t report.Tally
		var lat float64
		for b := b0; b < b1; b++ {
			t.Add(tallies[b])
			lat += w.latSum[b]
		}
		pr := report.Phase{Name: p.Name, StartS: report.Round(float64(start) / 1e9), EndS: report.Round(float64(end) / 1e9), Rates: t.Rates(d)}
		if t.Goodput > 0 {
			pr.Latency.Mean = report.RoundSeconds(lat / float64(t.Goodput))
		}
		for _, cr := range levee.Criticalities() {
			if ct := w.crit[i][cr]; ct.Offered > 0 {
				pr.ByCriticality = append(pr.ByCriticality, report.Class{Name: cr.String(), Rates: ct.Rates(d)})
			}
		}
		r.Phases = append(r.Phases, pr)
		start = end
	}
	r.Series = report.SeriesOf(tallies, bs)
	r.OutageS = report.Outage(r.Series)
	r.RecoveryS = r.RecoveryAfter(s.Trigger)
	for _, t := range w.tiers {
		var tot, peak int64
		for _, v := range t.recv {
			tot += v
			peak = max(peak, v)
		}
		r.Tiers = append(r.Tiers, report.Tier{
			Name: t.cfg.Name, ReceivedRPS: report.Round(float64(tot) / (float64(w.end) / 1e9)),
			PeakRecvRPS: report.Round(float64(peak) / bs), Instances: len(t.insts), Protected: t.protect, Received: tot,
		})
	}
	for _, in := range w.insts {
		ir, is := in.result(bs)
		r.Instances = append(r.Instances, ir)
		r.Series.Instances = append(r.Series.Instances, is)
	}
	return r
}

// result returns the instance's totals and series, buckets of bs seconds.
func (in *instance) result(bs float64) (report.Instance, report.InstanceSeries) {
	w := in.w
	ir := report.Instance{Name: in.name, Site: in.site, PeakInflight: in.peakInflight, Crashes: in.crashes}
	for r, n := range in.byReason {
		if n > 0 {
			if ir.RejectedBy == nil {
				ir.RejectedBy = map[string]int64{}
			}
			ir.RejectedBy[levee.Reason(r).String()] = n
		}
	}
	is := report.InstanceSeries{Name: in.name}
	var peak int32
	for b := 0; b < w.nb; b++ {
		ir.Received += int64(in.recv[b])
		ir.Served += int64(in.served[b])
		ir.Rejected += int64(in.rejected[b])
		peak = max(peak, in.recv[b])
		is.ReceivedRPS = append(is.ReceivedRPS, report.Round(float64(in.recv[b])/bs))
		is.ServedRPS = append(is.ServedRPS, report.Round(float64(in.served[b])/bs))
		is.RejectedRPS = append(is.RejectedRPS, report.Round(float64(in.rejected[b])/bs))
		is.Utilisation = append(is.Utilisation, report.Round(float64(in.util[b])))
		is.Inflight = append(is.Inflight, float64(in.inflightMax[b]))
		is.QueueDelayS = append(is.QueueDelayS, report.Round(float64(in.qdMax[b])))
		is.State = append(is.State, int(in.state[b]))
	}
	ir.PeakRecvRPS = report.Round(float64(peak) / bs)
	return ir, is
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
	return report.Round(float64(cores) / (t.meanSvc / 1e9))
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
		// over the last phase only
		var recv, served float64
		b0 := int(p.StartS / r.Series.BucketS)
		for _, is := range r.Series.Instances {
			for b := b0; b < len(is.ReceivedRPS); b++ {
				recv += is.ReceivedRPS[b]
				served += is.ServedRPS[b]
			}
		}
		row := KRow{K: k}
		if recv > 0 {
			row.BackendProcessedFraction = report.Round(served / recv)
		}
		if p.OfferedRPS > 0 {
			row.LocalRejectFraction = report.Round(p.ThrottledRPS / p.OfferedRPS)
		}
		n := float64(len(r.Series.Instances[0].ReceivedRPS) - b0)
		acceptRPS := served / n
		if acceptRPS > 0 {
			load := p.OfferedRPS / acceptRPS
			row.Overload = report.Round(load)
			// The throttle package's own virtual-time run at the same
			// demand, acceptance rate and backend queue depth.
			bt := s.Tiers[len(s.Tiers)-1]
			st := throttle.Simulate(throttle.Scenario{
				K: k, Load: load, Capacity: acceptRPS,
				Warmup:  s.Duration() - s.Phases[last].Duration.D(),
				Measure: s.Phases[last].Duration.D(),
				Burst:   time.Duration(float64(bt.Queue+bt.Cores) / acceptRPS * float64(time.Second)),
				Poisson: true, Seed: *rep.Seed,
			})
			row.ExpectedBackendProcessedFraction = report.Round(1 - st.BackendReject)
			row.ExpectedLocalRejectFraction = report.Round(st.LocalReject)
			f := throttle.Formula(k, load)
			row.FormulaBackendProcessedFraction = report.Round(1 - f.BackendReject)
			row.FormulaLocalRejectFraction = report.Round(f.LocalReject)
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
		for b := b0; b < b1 && b < len(r.Series.OfferedRPS); b++ {
			offered += r.Series.OfferedRPS[b]
		}
		row := AmpRow{Layers: j.run.Layers, RetriesPerLayer: s.Amplification.RetriesPerLayer, Protection: j.run.Protection}
		if offered > 0 {
			row.Amplification = report.Round(bottom / offered)
		}
		rows = append(rows, row)
	}
	return rows
}

// WriteTable writes the report as readable text tables: the report's own
// (report.Report.WriteText) and the scenario's K or amplification table.
func (r *Report) WriteTable(out io.Writer) error {
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		return err
	}
	if len(r.KTable) > 0 {
		b.WriteString("\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
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
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "retrying layers\tretries each\tprotection\tamplification\t")
		for _, a := range r.AmplificationTable {
			fmt.Fprintf(tw, "%d\t%d\t%s\t×%.2f\t\n", a.Layers, a.RetriesPerLayer, a.Protection, a.Amplification)
		}
		tw.Flush()
	}
	_, err := io.WriteString(out, b.String())
	return err
}
