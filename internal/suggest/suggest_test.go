package suggest

import "testing"

func TestClosest(t *testing.T) {
	fields := []string{"name", "capacity_rps", "capacity_tier", "phases", "clients", "tiers", "trigger"}
	scenarios := []string{"amplification", "avalanche", "lose-site", "metastable", "throttle"}
	tests := []struct {
		word       string
		candidates []string
		want       string
	}{
		{"capacity_rsp", fields, "capacity_rps"}, // transposition
		{"capacity_rp", fields, "capacity_rps"},  // deletion
		{"tires", fields, "tiers"},
		{"Phases", fields, "phases"}, // case
		{"avalance", scenarios, "avalanche"},
		{"aval", scenarios, "avalanche"}, // prefix
		{"meta-stable", scenarios, "metastable"},
		{"losesite", scenarios, "lose-site"},
		{"zzz", scenarios, ""},
		{"x", fields, ""},
		{"capacity", fields, "capacity_rps"}, // prefix of two: the closer, then the first
		{"", fields, ""},
	}
	for _, tt := range tests {
		if got := Closest(tt.word, tt.candidates); got != tt.want {
			t.Errorf("Closest(%q) = %q, want %q", tt.word, got, tt.want)
		}
	}
}

func TestHint(t *testing.T) {
	if got, want := Hint("trottle", []string{"throttle"}), ` (did you mean "throttle"?)`; got != want {
		t.Errorf("Hint = %q, want %q", got, want)
	}
	if got := Hint("nothing", []string{"throttle"}); got != "" {
		t.Errorf("Hint = %q, want empty", got)
	}
}

func TestDistance(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"", "", 0}, {"a", "", 1}, {"", "ab", 2}, {"kitten", "sitting", 3},
		{"ab", "ba", 1}, {"capacity_rsp", "capacity_rps", 1}, {"größe", "grösse", 2},
	}
	for _, tt := range tests {
		if got := distance(tt.a, tt.b); got != tt.want {
			t.Errorf("distance(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
