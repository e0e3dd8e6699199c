package config

import (
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"

	"github.com/levee-dev/levee/internal/suggest"
)

// EnvPrefix starts every environment variable levee reads.
const EnvPrefix = "LEVEE_"

// leaf is a field reachable from the root (or a section) through struct
// fields only: the unit an environment variable or an override sets.
type leaf struct {
	path    string // canonical field path, "signals.cpu.target"
	env     string // LEVEE_SIGNALS_CPU_TARGET
	section string // "" for Config's own fields
	index   []int
	typ     reflect.Type
	restart bool
	secret  bool
}

func (l *leaf) value(cfg *Config) reflect.Value {
	v := reflect.ValueOf(cfg).Elem()
	if l.section != "" {
		v = reflect.ValueOf(cfg.Sections[l.section]).Elem()
	}
	return v.FieldByIndex(l.index)
}

// isScalar reports whether values of t are written as one scalar.
func isScalar(t reflect.Type) bool {
	if t == durationType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return true
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Slice, reflect.Map, reflect.Pointer, reflect.Interface, reflect.Array:
		return false
	}
	return true
}

// leaves lists the leaves of cfg's type and of its sections, sorted by
// path.
func leaves(cfg *Config) []leaf {
	var out []leaf
	walkLeaves(configType, "", "", nil, false, &out)
	for name, s := range cfg.Sections {
		if rv := reflect.ValueOf(s); rv.Kind() == reflect.Pointer && rv.Elem().Kind() == reflect.Struct {
			walkLeaves(rv.Elem().Type(), name, name, nil, false, &out)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

func walkLeaves(t reflect.Type, section, path string, idx []int, restart bool, out *[]leaf) {
	for _, f := range fields(t) {
		p := child(path, f.name)
		ix := append(slices.Clone(idx), f.index)
		ft := t.Field(f.index).Type
		r := restart || f.restart
		if ft.Kind() == reflect.Struct && !isScalar(ft) {
			walkLeaves(ft, section, p, ix, r, out)
			continue
		}
		*out = append(*out, leaf{path: p, env: envName(p), section: section, index: ix, typ: ft, restart: r, secret: f.secret})
	}
}

// envName returns the environment variable for a field path:
// "signals.cpu.target" → LEVEE_SIGNALS_CPU_TARGET.
func envName(path string) string {
	return EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_", "-", "_").Replace(path))
}

// valueNode turns the text of an environment variable or an override into
// a node for a field of type t: a scalar field takes the text as it is; a
// list of scalars takes comma-separated items unless the text is a YAML
// flow list ("[a, b]"); anything else is parsed as YAML (a flow mapping
// such as "{acme: {rate: 100}}").
func valueNode(t reflect.Type, text string) (*yaml.Node, string) {
	if isScalar(t) {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: text}, ""
	}
	trimmed := strings.TrimSpace(text)
	if t.Kind() == reflect.Slice && isScalar(t.Elem()) && !strings.HasPrefix(trimmed, "[") {
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if trimmed != "" {
			for _, item := range strings.Split(trimmed, ",") {
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: strings.TrimSpace(item)})
			}
		}
		return n, ""
	}
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, "not valid YAML: " + strings.TrimPrefix(err.Error(), "yaml: ")
	}
	if len(doc.Content) == 0 {
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null"}, ""
	}
	n := doc.Content[0]
	clearLines(n, 0)
	return n, ""
}

// clearLines zeroes the positions of a node parsed from one line of text
// (an environment variable): "line 1" would point into no file.
func clearLines(n *yaml.Node, depth int) {
	if depth > 64 {
		return
	}
	n.Line, n.Column = 0, 0
	for _, c := range n.Content {
		clearLines(c, depth+1)
	}
}

// set decodes text onto the leaf, reporting problems under source.
func set(cfg *Config, l *leaf, text, source string, ps *problems) {
	if !utf8.ValidString(text) {
		// A file is refused whole when it is not UTF-8; a value from the
		// environment or the admin endpoint is held to the same rule, so
		// that the config it makes can be written out and read back.
		ps.add(origin{source: source}, l.path, fmt.Sprintf("is not valid UTF-8: %q", text))
		return
	}
	n, bad := valueNode(l.typ, text)
	if bad != "" {
		ps.add(origin{source: source}, l.path, bad)
		return
	}
	d := &decoder{source: source, ps: ps}
	d.decode(n, l.value(cfg), l.path, l.path)
}

// applyEnv applies the LEVEE_* variables of env. An empty value counts as
// unset. A LEVEE_ variable that names no field but is within a typo of one
// is reported; others are left alone (levee's tools read a few of their
// own).
func applyEnv(cfg *Config, env []string, ps *problems) {
	if len(env) == 0 {
		return
	}
	ls := leaves(cfg)
	byEnv := make(map[string]*leaf, len(ls))
	names := make([]string, 0, len(ls))
	for i := range ls {
		byEnv[ls[i].env] = &ls[i]
		names = append(names, ls[i].env)
	}
	seen := map[string]bool{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || !strings.HasPrefix(k, EnvPrefix) || seen[k] {
			continue
		}
		seen[k] = true
		l := byEnv[k]
		if l == nil {
			if s := suggest.Hint(k, names); s != "" {
				ps.add(origin{source: "env " + k}, "", "unknown variable"+s)
			}
			continue
		}
		if v == "" {
			continue
		}
		set(cfg, l, v, "env "+k, ps)
	}
}

// applyOverrides applies values by field path (the admin endpoint's and
// WithOverrides').
func applyOverrides(cfg *Config, overrides map[string]string, ps *problems) {
	if len(overrides) == 0 {
		return
	}
	ls := leaves(cfg)
	paths := make([]string, 0, len(ls))
	for i := range ls {
		paths = append(paths, ls[i].path)
	}
	keys := make([]string, 0, len(overrides))
	for k := range overrides {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		i, found := sort.Find(len(ls), func(i int) int { return strings.Compare(k, ls[i].path) })
		if !found {
			ps.add(origin{source: "admin"}, k, "no such field"+suggest.Hint(k, paths))
			continue
		}
		set(cfg, &ls[i], overrides[k], "admin", ps)
	}
}

// EnvVars returns the environment variable of every field it can set, by
// field path, for a configuration with the given sections (see
// WithSection): the list the package documentation describes.
func EnvVars(opts ...Option) map[string]string {
	o := newOptions(append(opts, WithEnv(nil)))
	cfg := Default()
	for _, s := range o.sections {
		if cfg.Sections == nil {
			cfg.Sections = map[string]any{}
		}
		cfg.Sections[s.name] = s.defaults()
	}
	out := map[string]string{}
	for _, l := range leaves(cfg) {
		out[l.path] = l.env
	}
	return out
}
