package proxy

import (
	"github.com/levee-dev/levee/config"
)

// Section is the name of the proxy's section in levee's configuration
// file.
const Section = "proxy"

// WithSection registers the proxy section with config.Load, config.Parse
// or config.Open: the file's "proxy" key is decoded into a Config over
// DefaultConfig, LEVEE_PROXY_… variables override it, and its problems are
// reported with their file, line and field like the built-in sections'.
func WithSection() config.Option {
	return config.WithSection(Section, func() any { return DefaultConfig() })
}

// FromConfig returns cfg's proxy section, or nil when it was loaded
// without WithSection.
func FromConfig(cfg *config.Config) *Config {
	c, _ := cfg.Section(Section).(*Config)
	return c
}

// Validate reports c's problems to v, each at its field's position in the
// file (the configuration loader calls it).
func (c *Config) Validate(v *config.Validator) {
	c.check(func(field, msg string) { v.Errorf(field, "%s", msg) })
}

// ConfigTarget returns the config.Target that puts each reloaded
// configuration's proxy section in force (see Apply). Subscribe it to the
// Reloader after the other targets.
func (h *Handler) ConfigTarget() config.Target { return target{h} }

type target struct{ h *Handler }

func (t target) Check(next *config.Config) error {
	c := FromConfig(next)
	if c == nil {
		return nil
	}
	return t.h.check(c)
}

func (t target) Apply(next *config.Config) {
	if c := FromConfig(next); c != nil {
		if err := t.h.Apply(c); err != nil {
			t.h.log.Error("proxy: configuration not applied", "err", err)
		}
	}
}
