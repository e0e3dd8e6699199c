package load

import (
	"fmt"
	"io"
	"strings"
)

// WriteText writes the drill as text: every level, its checks, the order
// of shedding, and the verdict.
func (r *DrillReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "levee load drill %s\n%s\n\n", r.Scenario, r.Description)
	for _, l := range r.Drill.Levels {
		verdict := "ok"
		if !l.Passed {
			verdict = "FAILED"
		}
		fmt.Fprintf(&b, "%-16s %6s  %d responses\n", l.Name, verdict, l.Responses)
		for _, c := range l.Checks {
			mark := "✓"
			if !c.Passed {
				mark = "✗"
			}
			fmt.Fprintf(&b, "  %s %-40s %5.1f%% of %d", mark, c.Check, 100*c.PassShare, c.Responses)
			if c.Example != "" {
				fmt.Fprintf(&b, " (e.g. %s)", c.Example)
			}
			b.WriteString("\n")
		}
		if sh := l.Shedding; sh != nil {
			var parts []string
			for _, c := range sh.Rejected {
				parts = append(parts, fmt.Sprintf("%s %.0f%%", c.Name, 100*c.Share))
			}
			order := "held"
			if !sh.OrderHeld {
				order = "BROKEN"
			}
			fmt.Fprintf(&b, "  rejected (shed first → last): %s; order %s\n", strings.Join(parts, ", "), order)
		}
	}
	b.WriteString("\n")
	switch {
	case r.Drill.Stopped:
		b.WriteString("drill interrupted: the levels above ran\n")
	case r.Drill.Passed:
		b.WriteString("drill passed\n")
	default:
		b.WriteString("drill FAILED:\n")
		for _, f := range r.Drill.Failures {
			b.WriteString("  " + f + "\n")
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
