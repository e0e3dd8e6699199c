package fleet_test

import (
	"strings"
	"testing"

	"github.com/levee-dev/levee/config"
	"github.com/levee-dev/levee/fleet"
)

// TestConfigSection reads the fleet quota table as a section of levee's
// configuration file: decoded with positions, validated by
// Config.Validate, reloadable like any other section.
func TestConfigSection(t *testing.T) {
	section := config.WithSection("fleet", func() any { return &fleet.Config{} })
	file := "version: 1\nfleet:\n  tenants:\n    acme: {cores: 0.3, burst_core_seconds: 2}\n  default: {cores: 1}\n"
	cfg, err := config.Parse("levee.yaml", []byte(file), config.WithEnv(nil), section)
	if err != nil {
		t.Fatal(err)
	}
	fc := cfg.Section("fleet").(*fleet.Config)
	if got := fc.Tenants["acme"]; got.Cores != 0.3 || got.BurstCoreSeconds != 2 || fc.Default.Cores != 1 {
		t.Errorf("fleet section = %+v", fc)
	}
	for _, tc := range []struct {
		file, want string
	}{
		{strings.Replace(file, "cores: 0.3", "cores: -1", 1), "levee.yaml:3:3: fleet: fleet: bad config: tenant \"acme\""},
		{strings.Replace(file, "burst_core_seconds", "burst", 1), `levee.yaml:4:24: fleet.tenants.acme.burst: unknown field "burst" (did you mean "burst_core_seconds"?)`},
	} {
		_, err := config.Parse("levee.yaml", []byte(tc.file), config.WithEnv(nil), section)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want it to contain %q", err, tc.want)
		}
	}
	env := []string{"LEVEE_FLEET_DEFAULT_CORES=2"}
	cfg, err = config.Parse("levee.yaml", []byte(file), config.WithEnv(env), section)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Section("fleet").(*fleet.Config).Default.Cores; got != 2 {
		t.Errorf("default cores from LEVEE_FLEET_DEFAULT_CORES = %v, want 2", got)
	}
}
