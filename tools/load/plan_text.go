package load

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes the plan as text: its steps, what it found and the
// plan it makes.
func (r *PlanReport) WriteText(w io.Writer) error {
	var b strings.Builder
	s := &r.Plan
	fmt.Fprintf(&b, "levee load plan %s\n%s\n\n", r.Scenario, r.Description)
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "stage\toffered/s\tgoodput/s\tp99 ms\terrors\tSLO\tCPU ms/req\tutilisation\t")
	for _, st := range s.Steps {
		slo := "met"
		switch {
		case st.Saturated:
			slo = "saturated"
		case !st.MeetsSLO:
			slo = "broken"
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%.1f%%\t%s\t%s\t%s\t\n", st.Stage, st.OfferedRPS, st.GoodputRPS, ms(st.P99S),
			100*st.ErrorRate, slo, ms(st.CPUPerRequestS), pct(st.Utilisation))
	}
	tw.Flush()
	b.WriteString("\n")
	line := func(label, format string, args ...any) {
		fmt.Fprintf(&b, "%-34s "+format+"\n", append([]any{label}, args...)...)
	}
	line("SLO", "p99 ≤ %v, errors ≤ %.1f%%", s.SLO.P99, 100*s.SLO.ErrorRate)
	if s.KneeRPS > 0 {
		line("capacity at the SLO (knee)", "%.0f requests/s", s.KneeRPS)
	} else {
		line("capacity at the SLO (knee)", "not found: no step met the SLO")
	}
	if s.BreakingRPS > 0 {
		line("breaking point", "%.0f requests/s offered (goodput < 90%% of it)", s.BreakingRPS)
	} else {
		line("breaking point", "not reached up to %.0f requests/s", s.MaxTriedRPS)
	}
	if s.PastRPS > 0 {
		line("goodput past it", "%.0f requests/s at %.0f offered, %.0f%% of the peak %.0f", s.PastGoodputRPS, s.PastRPS, 100*s.PastGoodputShare, s.PeakGoodputRPS)
	}
	if m := s.Metastability; m != nil {
		who := m.Client
		if m.Client == ClientNaive {
			who = fmt.Sprintf("naive clients with %d retries", m.Retries)
		}
		if m.Recovered {
			line("after an overload ("+who+")", "recovers in %.1f s (%.0f/s → %.0f/s → %.0f/s)", *m.RecoveryS, m.NormalRPS, m.OverloadRPS, m.NormalRPS)
		} else {
			line("after an overload ("+who+")", "DOES NOT RECOVER: metastable, %.0f%% goodput back at %.0f/s", 100*m.AfterGoodputShare, m.NormalRPS)
		}
	}
	if c := s.CPU; c != nil {
		if c.PerRequestS > 0 {
			line("CPU per request", "%.3f ms (%s)", 1000*c.PerRequestS, c.Source)
		}
		if c.UtilisationAtKnee > 0 {
			line("CPU utilisation at the knee", "%.0f%% of the allowed cores (%s)", 100*c.UtilisationAtKnee, c.Source)
		}
	}
	if s.KneeRPS > 0 {
		th := fmt.Sprintf("shed above %.0f requests/s per instance", s.Threshold.RPS)
		if s.Threshold.CPUTarget > 0 {
			th += fmt.Sprintf("; signals.cpu.target: %.2f", s.Threshold.CPUTarget)
		}
		line("shedding threshold", "%s", th)
	}
	if z := s.Sizing; z != nil {
		line("instances for the peak", "%d for %.0f requests/s at %.0f each; N+2 = %d", z.N, z.PeakRPS, z.PerInstanceRPS, z.NPlus2)
		line("two sites, either one lost", "%d per site (each sized for the whole peak), %d in all", z.PerSite, z.TwoSites)
	}
	if s.Stopped {
		line("stopped", "%s: the figures cover the steps that ran", s.Reason)
	} else if s.Reason != "" {
		line("note", "%s", s.Reason)
	}
	for _, n := range r.Notes {
		line("note", "%s", n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func ms(s float64) string {
	if s <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", 1000*s)
}

func pct(x float64) string {
	if x <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", 100*x)
}
