package config

import (
	"encoding"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/levee-dev/levee/internal/suggest"
)

// maxNodes bounds the nodes one document may make the decoder visit,
// aliases expanded: a few lines of anchors and aliases can otherwise stand
// for billions of nodes.
const maxNodes = 100000

var (
	durationType    = reflect.TypeFor[time.Duration]()
	unmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	marshalerType   = reflect.TypeFor[encoding.TextMarshaler]()
	configType      = reflect.TypeFor[Config]()
)

// decoder decodes yaml nodes onto Go values whose fields carry yaml tags,
// recording where every value came from and collecting every problem.
type decoder struct {
	source   string
	ps       *problems
	sections map[string]any // registered sections, decoded at the top level
	visited  int
	tooBig   bool
}

// at records a problem at node n, naming the field as written.
func (d *decoder) fail(n *yaml.Node, written, format string, args ...any) {
	d.ps.add(origin{source: d.source, line: n.Line, column: n.Column}, written, fmt.Sprintf(format, args...))
}

// decode decodes n onto v (settable). path is the canonical field path,
// written the path as the user wrote it.
func (d *decoder) decode(n *yaml.Node, v reflect.Value, path, written string) {
	if d.visited++; d.visited > maxNodes {
		if !d.tooBig {
			d.tooBig = true
			d.fail(n, written, "the document is too large once its aliases are expanded (more than %d nodes)", maxNodes)
		}
		return
	}
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			d.fail(n, written, "unknown alias")
			return
		}
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return
		}
		n = n.Content[0]
	}
	if isNull(n) {
		return // keep the value already there (the default)
	}
	d.ps.origins[path] = origin{source: d.source, line: n.Line, column: n.Column, written: written}
	t := v.Type()
	switch {
	case t == durationType:
		d.duration(n, v, written)
		return
	case reflect.PointerTo(t).Implements(unmarshalerType):
		d.text(n, v, written)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		d.structure(n, v, path, written)
	case reflect.Slice:
		d.list(n, v, path, written)
	case reflect.Map:
		d.mapping(n, v, path, written)
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		d.decode(n, v.Elem(), path, written)
	default:
		d.scalar(n, v, written)
	}
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

// scalarValue returns n's text if n is a scalar, and reports a problem
// otherwise.
func (d *decoder) scalarValue(n *yaml.Node, written, want string) (string, bool) {
	if n.Kind != yaml.ScalarNode {
		d.fail(n, written, "must be %s, got %s", want, kindName(n))
		return "", false
	}
	return n.Value, true
}

func kindName(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return strconv.Quote(n.Value)
	}
	return "something else"
}

func (d *decoder) duration(n *yaml.Node, v reflect.Value, written string) {
	s, ok := d.scalarValue(n, written, `a duration such as "50ms"`)
	if !ok {
		return
	}
	x, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		if _, nerr := strconv.ParseFloat(strings.TrimSpace(s), 64); nerr == nil {
			d.fail(n, written, "%q needs a unit: a duration such as \"50ms\", \"2s\" or \"1m\"", s)
			return
		}
		d.fail(n, written, "must be a duration such as \"50ms\", got %q", s)
		return
	}
	v.SetInt(int64(x))
}

func (d *decoder) text(n *yaml.Node, v reflect.Value, written string) {
	s, ok := d.scalarValue(n, written, "a single value")
	if !ok {
		return
	}
	if err := v.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(s)); err != nil {
		d.fail(n, written, "%s", textError(err))
	}
}

// textError turns an UnmarshalText error into a message without the
// package prefix the user does not need.
func textError(err error) string {
	msg := err.Error()
	for _, p := range []string{"levee: ", "config: ", "overload: "} {
		msg = strings.TrimPrefix(msg, p)
	}
	return msg
}

func (d *decoder) scalar(n *yaml.Node, v reflect.Value, written string) {
	switch v.Kind() {
	case reflect.String:
		if s, ok := d.scalarValue(n, written, "a string"); ok {
			v.SetString(s)
		}
	case reflect.Bool:
		s, ok := d.scalarValue(n, written, "true or false")
		if !ok {
			return
		}
		switch strings.ToLower(strings.TrimSpace(s)) {
		case "true":
			v.SetBool(true)
		case "false":
			v.SetBool(false)
		default:
			d.fail(n, written, "must be true or false, got %q", s)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s, ok := d.scalarValue(n, written, "a whole number")
		if !ok {
			return
		}
		x, err := strconv.ParseInt(strings.TrimSpace(s), 0, v.Type().Bits())
		if err != nil {
			d.fail(n, written, "must be a whole number%s, got %q", rangeHint(err), s)
			return
		}
		v.SetInt(x)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		s, ok := d.scalarValue(n, written, "a whole number ≥ 0")
		if !ok {
			return
		}
		x, err := strconv.ParseUint(strings.TrimSpace(s), 0, v.Type().Bits())
		if err != nil {
			d.fail(n, written, "must be a whole number ≥ 0%s, got %q", rangeHint(err), s)
			return
		}
		v.SetUint(x)
	case reflect.Float32, reflect.Float64:
		s, ok := d.scalarValue(n, written, "a number")
		if !ok {
			return
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			d.fail(n, written, "must be a finite number, got %q", s)
			return
		}
		v.SetFloat(x)
	default:
		d.fail(n, written, "cannot be set from a file (a %s field)", v.Type())
	}
}

func rangeHint(err error) string {
	if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
		return " in range"
	}
	return ""
}

// fieldInfo describes a struct field as the file names it.
type fieldInfo struct {
	name    string
	index   int
	restart bool
	secret  bool
}

// fields lists the yaml-named fields of struct type t.
func fields(t reflect.Type) []fieldInfo {
	var out []fieldInfo
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" || !f.IsExported() {
			continue
		}
		out = append(out, fieldInfo{
			name:    name,
			index:   i,
			restart: f.Tag.Get("reload") == "restart",
			secret:  f.Tag.Get("config") == "secret",
		})
	}
	return out
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path, written string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, written, "must be a mapping of fields, got %s", kindName(n))
		return
	}
	fs := fields(v.Type())
	names := make([]string, 0, len(fs)+len(d.sections))
	for _, f := range fs {
		names = append(names, f.name)
	}
	top := v.Type() == configType
	if top {
		for name := range d.sections {
			names = append(names, name)
		}
	}
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, written, "field names must be plain strings, got %s", kindName(k))
			continue
		}
		key := k.Value
		kw := child(written, key)
		if line, dup := seen[key]; dup {
			d.fail(k, kw, "duplicate field (first at line %d)", line)
			continue
		}
		seen[key] = k.Line
		if key == "<<" {
			d.fail(k, written, "merge keys (<<) are not supported: write the fields out")
			continue
		}
		found := false
		for _, f := range fs {
			if f.name == key {
				d.decode(val, v.Field(f.index), child(path, key), kw)
				found = true
				break
			}
		}
		if found {
			continue
		}
		if sec, ok := d.sections[key]; ok && top {
			d.decode(val, reflect.ValueOf(sec).Elem(), key, kw)
			continue
		}
		what := "field"
		if top {
			what = "section"
		}
		d.fail(k, kw, "unknown %s %q%s", what, key, suggest.Hint(key, names))
	}
}

func (d *decoder) list(n *yaml.Node, v reflect.Value, path, written string) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, written, "must be a list, got %s", kindName(n))
		return
	}
	if len(n.Content) == 0 {
		v.Set(reflect.Zero(v.Type())) // an empty list is nil, as in Default
		return
	}
	out := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
	for i, e := range n.Content {
		d.decode(e, out.Index(i), index(path, i), index(written, i))
	}
	v.Set(out)
}

func (d *decoder) mapping(n *yaml.Node, v reflect.Value, path, written string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, written, "must be a mapping, got %s", kindName(n))
		return
	}
	t := v.Type()
	if len(n.Content) == 0 {
		v.Set(reflect.Zero(t)) // an empty mapping is nil, as in Default
		return
	}
	out := reflect.MakeMapWithSize(t, len(n.Content)/2)
	seen := make(map[string]int, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, written, "keys must be plain strings, got %s", kindName(k))
			continue
		}
		kw := child(written, k.Value)
		key := reflect.New(t.Key()).Elem()
		switch {
		case reflect.PointerTo(t.Key()).Implements(unmarshalerType):
			if err := key.Addr().Interface().(encoding.TextUnmarshaler).UnmarshalText([]byte(k.Value)); err != nil {
				d.fail(k, kw, "bad key: %s", textError(err))
				continue
			}
		case t.Key().Kind() == reflect.String:
			key.SetString(k.Value)
		default:
			d.fail(k, kw, "cannot be set from a file (keys of type %s)", t.Key())
			continue
		}
		canon := keyString(key)
		if line, dup := seen[canon]; dup {
			d.fail(k, kw, "duplicate key (first at line %d)", line)
			continue
		}
		seen[canon] = k.Line
		elem := reflect.New(t.Elem()).Elem()
		d.decode(val, elem, child(path, canon), kw)
		out.SetMapIndex(key, elem)
	}
	v.Set(out)
}

// keyString is the canonical text of a map key: its MarshalText form if it
// has one, else the string itself.
func keyString(k reflect.Value) string {
	if k.Type().Implements(marshalerType) {
		if b, err := k.Interface().(encoding.TextMarshaler).MarshalText(); err == nil {
			return string(b)
		}
	}
	if k.Kind() == reflect.String {
		return k.String()
	}
	return fmt.Sprint(k.Interface())
}
