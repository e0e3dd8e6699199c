package fleet

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"unicode/utf8"
)

// MaxCores bounds Quota.Cores: a million cores of a fleet.
const MaxCores = 1e6

// MaxTenantName bounds the length of a tenant name in Config, in bytes.
const MaxTenantName = 256

// Quota is one tenant's share of the fleet, in CPU cost.
type Quota struct {
	// Cores is the tenant's rate in core-seconds of CPU per second, summed
	// over every instance of the fleet: 2 means "two cores of the fleet",
	// 0.3 "30% of one core". A listed tenant needs 0 < Cores ≤ MaxCores;
	// in Config.Default, 0 means that tenants not listed are not limited.
	Cores float64 `yaml:"cores" json:"cores"`
	// BurstCoreSeconds is how much cost, in core-seconds fleet-wide, the
	// tenant may spend at once above its rate after a quiet spell.
	// 0 means the default, Cores × 5 s; otherwise it must be positive,
	// finite and at most Cores × 1 h. Each instance holds the part of the
	// burst in proportion to its lease.
	BurstCoreSeconds float64 `yaml:"burst_core_seconds" json:"burst_core_seconds"`
}

// Config is the fleet-wide quota table: the quota of each listed tenant and
// the quota that every other tenant shares. The zero Config limits nobody.
// It is plain data, meant to be decoded from a configuration file (YAML
// or JSON keys as tagged) and applied with New or Limiter.Update.
type Config struct {
	// Tenants maps a tenant name (as the adapters derive it, see
	// levee.Call.Tenant) to its quota. Names are non-empty valid UTF-8 of
	// at most MaxTenantName bytes.
	Tenants map[string]Quota `yaml:"tenants" json:"tenants"`
	// Default is the quota shared, together, by every tenant not listed:
	// they draw on one pool, so that unknown or rotating tenant names buy
	// nothing (per-tenant fairness inside the pool is admit's fair-share
	// shedding's job). Cores 0, the default, leaves them unlimited.
	Default Quota `yaml:"default" json:"default"`
}

// ErrConfig is returned (wrapped) by Config.Validate, New and Update for a
// configuration they refuse; the message names the tenant and the field.
var ErrConfig = errors.New("fleet: bad config")

// Validate checks c and returns an error wrapping ErrConfig that names
// every tenant at fault (sorted), or nil.
func (c Config) Validate() error {
	var errs []error
	names := make([]string, 0, len(c.Tenants))
	for n := range c.Tenants {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := checkName(n); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := c.Tenants[n].check(false); err != nil {
			errs = append(errs, fmt.Errorf("tenant %q: %w", n, err))
		}
	}
	if err := c.Default.check(true); err != nil {
		errs = append(errs, fmt.Errorf("default: %w", err))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
}

func checkName(n string) error {
	switch {
	case n == "":
		return errors.New("empty tenant name")
	case len(n) > MaxTenantName:
		return fmt.Errorf("tenant %.32q…: name longer than %d bytes", n, MaxTenantName)
	case !utf8.ValidString(n):
		return fmt.Errorf("tenant %q: name is not valid UTF-8", n)
	}
	return nil
}

func (q Quota) check(optional bool) error {
	switch {
	case optional && q.Cores == 0 && q.BurstCoreSeconds == 0:
		return nil
	case !(q.Cores > 0) || q.Cores > MaxCores:
		return fmt.Errorf("cores = %v, want 0 < cores ≤ %g", q.Cores, float64(MaxCores))
	case q.BurstCoreSeconds < 0 || math.IsNaN(q.BurstCoreSeconds) || q.BurstCoreSeconds > q.Cores*3600:
		return fmt.Errorf("burst_core_seconds = %v, want 0 (default) or up to cores × 3600", q.BurstCoreSeconds)
	}
	return nil
}

// burstSeconds is how many seconds of its rate the burst holds, the
// GCRA's tolerance in time; the same for every instance whatever its lease.
func (q Quota) burstSeconds() float64 {
	if q.BurstCoreSeconds > 0 {
		return q.BurstCoreSeconds / q.Cores
	}
	return defaultBurstSeconds
}

// defaultBurstSeconds is the default burst in seconds of the quota: long
// enough that an instance whose lease is a few requests per second
// absorbs their Poisson noise.
const defaultBurstSeconds = 5
