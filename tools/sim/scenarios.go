package sim

import (
	"embed"
	"io/fs"
	"sort"
	"strings"
)

// The built-in scenarios are committed YAML, embedded in the binary:
// `levee sim NAME` runs NAME.yaml, `levee sim NAME --show` prints it, and
// `levee sim -f FILE` runs a custom one written the same way.
//
//go:embed scenarios/*.yaml
var scenarioFiles embed.FS

// ScenarioFS returns the built-in scenario files, NAME.yaml each.
func ScenarioFS() fs.FS {
	sub, _ := fs.Sub(scenarioFiles, "scenarios")
	return sub
}

// ScenarioNames lists the built-in scenarios, sorted.
func ScenarioNames() []string {
	ents, _ := scenarioFiles.ReadDir("scenarios")
	var out []string
	for _, e := range ents {
		if n, ok := strings.CutSuffix(e.Name(), ".yaml"); ok {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// BuiltIn returns the YAML of the named built-in scenario and whether it
// exists.
func BuiltIn(name string) ([]byte, bool) {
	if strings.ContainsAny(name, "/\\") {
		return nil, false
	}
	b, err := scenarioFiles.ReadFile("scenarios/" + name + ".yaml")
	return b, err == nil
}
