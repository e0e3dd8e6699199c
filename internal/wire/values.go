package wire

import "github.com/levee-dev/levee"

// Shared header values for clients that set levee's headers on outgoing
// requests: assigning one to a header (h[Criticality] =
// CriticalityValues[c]) does not allocate. Never modify them.
var (
	// CriticalityValues holds each criticality's FormatCriticality, by
	// criticality.
	CriticalityValues = func() (v [levee.NumCriticalities][]string) {
		for c := range v {
			v[c] = []string{FormatCriticality(levee.Criticality(c))}
		}
		return v
	}()
	// AttemptValues holds FormatAttempt(n) for n in 0..MaxAttempt.
	AttemptValues = func() (v [MaxAttempt + 1][]string) {
		for n := range v {
			v[n] = []string{FormatAttempt(n)}
		}
		return v
	}()
)
