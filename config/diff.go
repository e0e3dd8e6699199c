package config

import (
	"bytes"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"encoding/json"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Redacted is what a secret field shows in diffs, logs and the admin
// endpoint.
const Redacted = "<redacted>"

// Change is one field that differs between two configurations.
type Change struct {
	// Path is the field's path, such as "signals.cpu.target".
	Path string `json:"path"`
	// Old and New are the values as YAML text (a scalar, or a flow
	// collection such as "[a, b]"); "(none)" for a map key or section
	// that is absent on one side; secrets show Redacted.
	Old string `json:"old"`
	New string `json:"new"`
	// Restart reports that the field cannot change while a service runs.
	Restart bool `json:"restart,omitempty"`
}

// String returns "path: old → new".
func (c Change) String() string { return c.Path + ": " + c.Old + " → " + c.New }

const absent = "(none)"

// Diff lists the fields that differ from a to b, in path order: scalars
// one by one, lists element by element when their lengths agree (as a
// whole otherwise), maps key by key.
func Diff(a, b *Config) []Change {
	var out []Change
	diffValue(reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem(), "", false, false, &out)
	names := map[string]bool{}
	for n := range a.Sections {
		names[n] = true
	}
	for n := range b.Sections {
		names[n] = true
	}
	keys := make([]string, 0, len(names))
	for n := range names {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	for _, n := range keys {
		sa, sb := a.Sections[n], b.Sections[n]
		switch {
		case sa == nil:
			out = append(out, Change{Path: n, Old: absent, New: format(reflect.ValueOf(sb), false, true)})
		case sb == nil:
			out = append(out, Change{Path: n, Old: format(reflect.ValueOf(sa), false, true), New: absent})
		case reflect.TypeOf(sa) != reflect.TypeOf(sb):
			out = append(out, Change{Path: n, Old: format(reflect.ValueOf(sa), false, true), New: format(reflect.ValueOf(sb), false, true)})
		default:
			diffValue(reflect.ValueOf(sa).Elem(), reflect.ValueOf(sb).Elem(), n, false, false, &out)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

func diffValue(a, b reflect.Value, path string, restart, secret bool, out *[]Change) {
	leafChange := func() {
		if format(a, false, false) == format(b, false, false) {
			return
		}
		*out = append(*out, Change{Path: path, Old: format(a, secret, true), New: format(b, secret, true), Restart: restart})
	}
	t := a.Type()
	if isScalar(t) {
		leafChange()
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for _, f := range fields(t) {
			diffValue(a.Field(f.index), b.Field(f.index), child(path, f.name), restart || f.restart, secret || f.secret, out)
		}
	case reflect.Slice:
		if a.Len() != b.Len() || isScalar(t.Elem()) {
			leafChange()
			return
		}
		for i := range a.Len() {
			diffValue(a.Index(i), b.Index(i), index(path, i), restart, secret, out)
		}
	case reflect.Map:
		keys := map[string]reflect.Value{}
		for _, m := range []reflect.Value{a, b} {
			it := m.MapRange()
			for it.Next() {
				keys[keyString(it.Key())] = it.Key()
			}
		}
		names := make([]string, 0, len(keys))
		for k := range keys {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			va, vb := a.MapIndex(keys[k]), b.MapIndex(keys[k])
			p := child(path, k)
			switch {
			case !va.IsValid():
				*out = append(*out, Change{Path: p, Old: absent, New: format(vb, secret, true), Restart: restart})
			case !vb.IsValid():
				*out = append(*out, Change{Path: p, Old: format(va, secret, true), New: absent, Restart: restart})
			default:
				diffValue(va, vb, p, restart, secret, out)
			}
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				leafChange()
			}
			return
		}
		diffValue(a.Elem(), b.Elem(), path, restart, secret, out)
	default:
		leafChange()
	}
}

// format writes v as YAML text: a scalar as it is, a collection in flow
// style. With redact, secret fields inside v, and v itself if secret,
// show Redacted.
func format(v reflect.Value, secret, redact bool) string {
	n := toNode(v, secret, redact)
	if n.Kind == yaml.ScalarNode {
		if n.Value == "" && n.Tag == "!!str" {
			return `""`
		}
		return n.Value
	}
	setFlow(n)
	untag(n)
	b, err := yaml.Marshal(n)
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(b))
}

func setFlow(n *yaml.Node) {
	n.Style |= yaml.FlowStyle
	for _, c := range n.Content {
		setFlow(c)
	}
}

// toNode builds the YAML node of v: fields in declaration order, map keys
// sorted; with redact, non-empty secret strings show Redacted (secret says
// v is inside a secret field).
func toNode(v reflect.Value, secret, redact bool) *yaml.Node {
	scalar := func(tag, val string) *yaml.Node {
		if secret && redact && tag == "!!str" {
			val = redactString(val)
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: val}
	}
	for v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
		}
		v = v.Elem()
	}
	t := v.Type()
	switch {
	case t == durationType:
		return scalar("!!str", fmtDuration(time.Duration(v.Int())))
	case t.Implements(marshalerType):
		b, err := v.Interface().(encoding.TextMarshaler).MarshalText()
		if err != nil {
			return scalar("!!str", "?")
		}
		return scalar("!!str", string(b))
	}
	key := func(s string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s} }
	switch t.Kind() {
	case reflect.Struct:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		for _, f := range fields(t) {
			n.Content = append(n.Content, key(f.name), toNode(v.Field(f.index), secret || f.secret, redact))
		}
		if t == configType && v.CanAddr() {
			c := v.Addr().Interface().(*Config)
			names := make([]string, 0, len(c.Sections))
			for name := range c.Sections {
				names = append(names, name)
			}
			sort.Strings(names)
			for _, name := range names {
				n.Content = append(n.Content, key(name), toNode(reflect.ValueOf(c.Sections[name]), false, redact))
			}
		}
		return n
	case reflect.Slice, reflect.Array:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for i := range v.Len() {
			n.Content = append(n.Content, toNode(v.Index(i), secret, redact))
		}
		return n
	case reflect.Map:
		n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keyString(keys[i]) < keyString(keys[j]) })
		for _, k := range keys {
			n.Content = append(n.Content, key(keyString(k)), toNode(v.MapIndex(k), secret, redact))
		}
		return n
	case reflect.Bool:
		return scalar("!!bool", strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return scalar("!!int", strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return scalar("!!int", strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		return scalar("!!float", strconv.FormatFloat(v.Float(), 'g', -1, 64))
	case reflect.String:
		return scalar("!!str", v.String())
	}
	return scalar("!!str", "?")
}

func redactString(s string) string {
	if s == "" {
		return s
	}
	return Redacted
}

// YAML returns c as a configuration file. Without redact, Parse reads it
// back to an equal Config; with redact, secrets show Redacted.
func (c *Config) YAML(redact bool) []byte {
	var buf bytes.Buffer
	enc := yaml.NewEncoder(&buf)
	enc.SetIndent(2)
	n := toNode(reflect.ValueOf(c).Elem(), false, redact)
	untag(n)
	if err := enc.Encode(n); err != nil {
		return nil
	}
	enc.Close()
	return buf.Bytes()
}

// untag drops the number and boolean tags toNode sets for JSON: in YAML
// "2" tagged !!float would print as "!!float 2", and the decoder reads
// fields by their Go type. String tags stay, so that a string such as
// "null" or "true" is quoted.
func untag(n *yaml.Node) {
	switch n.Tag {
	case "!!int", "!!float", "!!bool":
		n.Tag = ""
	}
	for _, c := range n.Content {
		untag(c)
	}
}

// JSON returns c as a JSON object with the file's field names, durations
// as strings ("50ms"), secrets redacted: the admin endpoint's form.
func (c *Config) JSON() []byte {
	var buf bytes.Buffer
	nodeJSON(&buf, toNode(reflect.ValueOf(c).Elem(), false, true))
	return buf.Bytes()
}

func nodeJSON(buf *bytes.Buffer, n *yaml.Node) {
	switch n.Kind {
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				buf.WriteByte(',')
			}
			k, _ := json.Marshal(n.Content[i].Value)
			buf.Write(k)
			buf.WriteByte(':')
			nodeJSON(buf, n.Content[i+1])
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, c := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			nodeJSON(buf, c)
		}
		buf.WriteByte(']')
	default:
		switch n.Tag {
		case "!!int", "!!float", "!!bool":
			buf.WriteString(n.Value)
		case "!!null":
			buf.WriteString("null")
		default:
			s, _ := json.Marshal(n.Value)
			buf.Write(s)
		}
	}
}

// Hash returns "sha256:" and the hex SHA-256 of c's redacted YAML form: it
// identifies a configuration in logs and on the admin endpoint (a token
// change does not change it; the diff says it changed).
func (c *Config) Hash() string {
	sum := sha256.Sum256(c.YAML(true))
	return "sha256:" + hex.EncodeToString(sum[:])
}
