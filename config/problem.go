package config

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Problem is one thing wrong with a configuration, located where the user
// wrote it.
type Problem struct {
	// Source is the file name as given to Load or Parse, "env LEVEE_…" for
	// an environment variable, "admin" for a runtime override, or "" for a
	// Config built in code.
	Source string `json:"file"`
	// Line and Column locate the value (or the key, for an unknown field)
	// in the file, from 1; 0 when the source has no lines.
	Line   int `json:"line"`
	Column int `json:"column"`
	// Field is the field's path as the user wrote it, such as
	// "signals.cpu.target", "admit.quotas.acme.rate" or
	// "http.routes[2].path".
	Field string `json:"field"`
	// Message says what is wrong, and what would be right.
	Message string `json:"message"`
}

// String formats the problem as "file:line:col: field: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.Source != "" {
		b.WriteString(p.Source)
		if p.Line > 0 {
			b.WriteString(":" + strconv.Itoa(p.Line))
			if p.Column > 0 {
				b.WriteString(":" + strconv.Itoa(p.Column))
			}
		}
		b.WriteString(": ")
	}
	if p.Field != "" {
		b.WriteString(p.Field + ": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Error is the error Load, Parse, Resolve and Validate return for an
// invalid configuration: every problem found, not just the first, in the
// order of the file (then the environment, then the overrides). Test for
// it with errors.As.
type Error struct {
	Problems []Problem
}

// Error lists the problems, one per line.
func (e *Error) Error() string {
	switch len(e.Problems) {
	case 0:
		return "config: invalid"
	case 1:
		return "config: " + e.Problems[0].String()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "config: %d problems:", len(e.Problems))
	for _, p := range e.Problems {
		b.WriteString("\n\t" + p.String())
	}
	return b.String()
}

// origin says where a value came from.
type origin struct {
	source       string
	line, column int
	written      string // the field path as the user wrote it
}

// problems collects Problems and resolves field paths to origins.
// maxProblems bounds the problems reported for one configuration: a
// file generated wrong can otherwise make thousands, too many to read.
const maxProblems = 50

type problems struct {
	list     []Problem
	dropped  int
	origins  map[string]origin
	fallback origin // where a problem with no better origin is reported (the file)
}

func (ps *problems) add(o origin, field, msg string) {
	if len(ps.list) >= maxProblems {
		ps.dropped++
		return
	}
	ps.list = append(ps.list, Problem{Source: o.source, Line: o.line, Column: o.column, Field: field, Message: msg})
}

// at adds a problem about the value at canonical path, located by its
// origin; a value the user did not write is located at its nearest
// ancestor that was written, if any.
func (ps *problems) at(path, msg string) {
	if o, ok := ps.origins[path]; ok {
		ps.add(o, o.written, msg)
		return
	}
	for p := parent(path); p != ""; p = parent(p) {
		if o, ok := ps.origins[p]; ok {
			o.written = ""
			ps.add(o, path, msg)
			return
		}
	}
	ps.add(ps.fallback, path, msg)
}

// err returns the problems as an *Error, sorted by source and position
// (file first, then environment, then overrides, then code), or nil.
func (ps *problems) err() error {
	if len(ps.list) == 0 {
		return nil
	}
	rank := func(s string) int {
		switch {
		case strings.HasPrefix(s, "env "):
			return 1
		case s == "admin":
			return 2
		case s == "":
			return 3
		}
		return 0
	}
	sort.SliceStable(ps.list, func(i, j int) bool {
		a, b := ps.list[i], ps.list[j]
		if ra, rb := rank(a.Source), rank(b.Source); ra != rb {
			return ra < rb
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
	out := ps.list
	if ps.dropped > 0 {
		out = append(out[:len(out):len(out)], Problem{Message: fmt.Sprintf("%d more problems not listed", ps.dropped)})
	}
	return &Error{Problems: out}
}

// parent returns the path one level up: "a.b" → "a", "a[2]" → "a",
// `a["x.y"]` → "a", "a" → "".
func parent(path string) string {
	if strings.HasSuffix(path, "]") {
		if i := strings.LastIndex(path, "["); i > 0 {
			// A quoted key may contain '[': find the bracket that opens it.
			if j := strings.LastIndex(path, `["`); j > 0 && path[len(path)-2] == '"' {
				i = j
			}
			return path[:i]
		}
	}
	if i := strings.LastIndexByte(path, '.'); i >= 0 {
		return path[:i]
	}
	return ""
}

// child returns the path of map key or struct field key below path.
func child(path, key string) string {
	if simpleKey(key) {
		if path == "" {
			return key
		}
		return path + "." + key
	}
	return path + "[" + strconv.Quote(key) + "]"
}

// index returns the path of element i of the list at path.
func index(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

func simpleKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '~') {
			return false
		}
	}
	return true
}
