package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText writes r as readable text tables: every phase of every run,
// a summary per run, the goodput share per criticality when more than one
// was offered, the crash events and the notes.
func (r *Report) WriteText(out io.Writer) error {
	var b strings.Builder
	b.WriteString(r.heading())
	if r.Description != "" {
		fmt.Fprintf(&b, "%s\n", strings.TrimSpace(r.Description))
	}
	b.WriteString("\n")
	r.phaseTable(&b)
	b.WriteString("\n")
	r.runTable(&b)
	if r.hasMix() {
		b.WriteString("\ngoodput ÷ offered per criticality (shed first → last):\n")
		r.mixTable(&b)
	}
	for _, run := range r.Runs {
		writeCrashes(&b, run)
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "note: %s\n", n)
		}
	}
	_, err := io.WriteString(out, b.String())
	return err
}

func (r *Report) heading() string {
	var parts []string
	if r.Seed != nil {
		parts = append(parts, fmt.Sprintf("seed %d", *r.Seed))
	}
	if r.DurationS > 0 {
		parts = append(parts, fmt.Sprintf("%.0fs of load", r.DurationS))
	}
	if r.CapacityRPS > 0 {
		parts = append(parts, fmt.Sprintf("capacity %.0f/s", r.CapacityRPS))
	}
	h := r.Tool
	if r.Scenario != "" {
		h += " " + r.Scenario
	}
	if len(parts) > 0 {
		h += " (" + strings.Join(parts, ", ") + ")"
	}
	return h + "\n"
}

// ms formats seconds as milliseconds, "-" for 0.
func ms(s float64) string {
	if s <= 0 {
		return "-"
	}
	if s < 0.01 {
		return fmt.Sprintf("%.2f", 1000*s)
	}
	return fmt.Sprintf("%.0f", 1000*s)
}

func (r *Report) phaseTable(b *strings.Builder) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tphase\toffered/s\tattempted/s\tthrottled/s\tgoodput/s\trejected/s\tfailed/s\tmean ms\tp50 ms\tp99 ms\t")
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%s\t\n", run.Name, p.Name,
				p.OfferedRPS, p.AttemptedRPS, p.ThrottledRPS, p.GoodputRPS, p.RejectedRPS, p.FailedRPS,
				ms(p.Latency.Mean), ms(p.Latency.P50), ms(p.Latency.P99))
		}
	}
	tw.Flush()
}

func (r *Report) runTable(b *strings.Builder) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
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
}

func (r *Report) hasMix() bool {
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			if len(p.ByCriticality) > 1 {
				return true
			}
		}
	}
	return false
}

// mixTable lists goodput ÷ offered per criticality, in the order the
// phases list them (shed first → last).
func (r *Report) mixTable(b *strings.Builder) {
	var names []string
	seen := map[string]bool{}
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			for _, c := range p.ByCriticality {
				if !seen[c.Name] {
					seen[c.Name] = true
					names = append(names, c.Name)
				}
			}
		}
	}
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprint(tw, "run\tphase\t")
	for _, n := range names {
		fmt.Fprintf(tw, "%s\t", n)
	}
	fmt.Fprintln(tw)
	for _, run := range r.Runs {
		for _, p := range run.Phases {
			fmt.Fprintf(tw, "%s\t%s\t", run.Name, p.Name)
			for _, n := range names {
				cell := "-"
				for _, c := range p.ByCriticality {
					if c.Name == n && c.OfferedRPS > 0 {
						cell = fmt.Sprintf("%.0f%%", 100*c.GoodputRPS/c.OfferedRPS)
					}
				}
				fmt.Fprintf(tw, "%s\t", cell)
			}
			fmt.Fprintln(tw)
		}
	}
	tw.Flush()
}

func writeCrashes(b *strings.Builder, run Run) {
	if len(run.CrashEvents) == 0 {
		return
	}
	fmt.Fprintf(b, "\ncrashes in %s:\n", run.Name)
	for i, c := range run.CrashEvents {
		if i == 8 {
			fmt.Fprintf(b, "  … %d more\n", len(run.CrashEvents)-i)
			break
		}
		fmt.Fprintf(b, "  t=%6.2fs %-12s %s\n", c.T, c.Instance, c.Cause)
	}
}
