package sim

import (
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/levee-dev/levee/internal/suggest"
)

// ParseError is a scenario that cannot be used, in the words of its YAML:
// the file and line, the field's path as written (tiers[0].service.mean)
// and what is wrong, never a Go type.
type ParseError struct {
	// File is the scenario's file name; "" when parsed from bytes.
	File string
	// Line is 1-based; 0 when the error concerns no one line.
	Line int
	// Field is the YAML path of the field at fault; "" for the document.
	Field string
	Msg   string
}

// Error formats e as "FILE:LINE: FIELD: MSG" when it has a file, else as
// "sim: line LINE: FIELD: MSG"; missing parts are left out.
func (e *ParseError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d: ", e.File, e.Line)
	case e.File != "":
		fmt.Fprintf(&b, "%s: ", e.File)
	case e.Line > 0:
		fmt.Fprintf(&b, "sim: line %d: ", e.Line)
	default:
		b.WriteString("sim: ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

var (
	yamlLine  = regexp.MustCompile(`^(?:yaml: )?(?:unmarshal errors:\s*)?line (\d+): (.*)$`)
	goTypeRef = regexp.MustCompile(` (?:in|into) (?:type )?[\w.*\[\]]+`)
)

// syntaxError turns an error of the YAML parser into a ParseError.
func syntaxError(err error) error {
	if pe, ok := err.(*ParseError); ok {
		return pe
	}
	msg := strings.TrimSpace(err.Error())
	if i := strings.IndexByte(msg, '\n'); i >= 0 && strings.HasPrefix(msg, "yaml: unmarshal errors:") {
		msg = strings.TrimSpace(msg[i+1:])
		if j := strings.IndexByte(msg, '\n'); j >= 0 {
			msg = msg[:j]
		}
	}
	e := &ParseError{Msg: strings.TrimPrefix(msg, "yaml: ")}
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = m[2]
	}
	e.Msg = goTypeRef.ReplaceAllString(e.Msg, "")
	return e
}

var unmarshaler = reflect.TypeFor[yaml.Unmarshaler]()

// checkNode checks that node can be decoded into a value of type t as a
// user would read it: mappings where a section is expected, lists where a
// list is, numbers, booleans and durations that parse, and no field the
// section does not have (with the closest one suggested). path is the
// node's YAML path for messages.
func checkNode(n *yaml.Node, t reflect.Type, path string) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshaler) {
		err := reflect.New(t).Interface().(yaml.Unmarshaler).UnmarshalYAML(n)
		if pe, ok := err.(*ParseError); ok && pe.Field == "" {
			pe.Field = path
		}
		return err
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return want(n, path, "a section of key: value lines")
		}
		fields := yamlFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			f, ok := fields[k.Value]
			if !ok {
				return &ParseError{Line: k.Line, Field: path, Msg: fmt.Sprintf("unknown field %q%s", k.Value, suggest.Hint(k.Value, sortedKeys(fields)))}
			}
			if err := checkNode(v, f.Type, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return want(n, path, "a section of key: value lines")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return want(n, path, "a list")
		}
		for i, c := range n.Content {
			if err := checkNode(c, t.Elem(), path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			return want(n, path, "true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		var v int64
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil {
			return want(n, path, "a whole number")
		}
	case reflect.Float32, reflect.Float64:
		tag := n.ShortTag()
		if n.Kind != yaml.ScalarNode || (tag != "!!int" && tag != "!!float") {
			return want(n, path, "a number")
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return want(n, path, "a text value")
		}
	}
	return nil
}

// want is the error for a node that is not what the field takes.
func want(n *yaml.Node, path, what string) error {
	got := "a section"
	switch n.Kind {
	case yaml.SequenceNode:
		got = "a list"
	case yaml.ScalarNode:
		got = strconv.Quote(n.Value)
	}
	return &ParseError{Line: n.Line, Field: path, Msg: fmt.Sprintf("want %s, got %s", what, got)}
}

// yamlFields maps the YAML names of t's fields to them.
func yamlFields(t reflect.Type) map[string]reflect.StructField {
	out := map[string]reflect.StructField{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f
	}
	return out
}

func sortedKeys(m map[string]reflect.StructField) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
