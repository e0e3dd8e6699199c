package proxy

import (
	"strings"
	"testing"
	"time"

	"github.com/levee-dev/levee/config"
)

const sectionYAML = `version: 1
http:
  trusted_networks: [10.0.0.0/8]
proxy:
  listen: :9000
  backends:
    static:
      - {address: 127.0.0.1:8081}
      - {address: 127.0.0.1:8082, max_conns: 16}
  health: {path: /healthz, every: 500ms}
  outlier: {max_ejected_share: 0.34}
`

// TestSection: the proxy section of levee's configuration file, decoded
// over the defaults.
func TestSection(t *testing.T) {
	cfg, err := config.Parse("proxy.yaml", []byte(sectionYAML), WithSection(), config.WithEnv(nil))
	if err != nil {
		t.Fatal(err)
	}
	c := FromConfig(cfg)
	if c == nil {
		t.Fatal("no proxy section")
	}
	if c.Listen != ":9000" || len(c.Backends.Static) != 2 || c.Backends.Static[1].MaxConns != 16 ||
		c.Health.Every != 500*time.Millisecond || c.Outlier.MaxEjectedShare != 0.34 || c.Limit.Initial != 20 {
		t.Errorf("decoded %+v", c)
	}
}

// TestSectionErrors: problems in the proxy section name file, line and
// field, every one of them; the environment overrides the file.
func TestSectionErrors(t *testing.T) {
	bad := strings.Replace(sectionYAML, "127.0.0.1:8082", "127.0.0.1", 1)
	bad = strings.Replace(bad, "max_ejected_share: 0.34", "max_ejected_share: 3", 1)
	bad = strings.Replace(bad, "every: 500ms", "evry: 500ms", 1)
	_, err := config.Parse("proxy.yaml", []byte(bad), WithSection(), config.WithEnv([]string{"LEVEE_PROXY_RETRY_MAX_ATTEMPTS=9"}))
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{
		`proxy.yaml:9:`, `proxy.backends.static[1].address: must be host:port, got "127.0.0.1"`,
		`proxy.yaml:10:`, `proxy.health.evry: unknown field "evry" (did you mean "every"?)`,
		`proxy.yaml:11:`, `proxy.outlier.max_ejected_share: must be in [0, 1], got 3`,
		`env LEVEE_PROXY_RETRY_MAX_ATTEMPTS: proxy.retry.max_attempts: must be in [1, 5], got 9`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}
