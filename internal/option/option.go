package option

import (
	"fmt"
	"strings"
)

// Error is an option value outside its documented range.
type Error struct {
	// Pkg is the package, such as "throttle".
	Pkg string
	// Call is the option with its arguments, such as "WithK(0.5)".
	Call string
	// Want states the range, such as "must be ≥ 1".
	Want string
}

// Error returns "pkg: Call: Want", for example
// "throttle: WithK(0.5): must be ≥ 1 (0 means the default, 2)".
func (e *Error) Error() string { return e.Pkg + ": " + e.Call + ": " + e.Want }

// New returns the *Error for the option name of package pkg called with
// args, whose documented range is want. Strings are quoted; other
// arguments print with %v (durations as "1.5s").
func New(pkg, name, want string, args ...any) *Error {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('(')
	for i, a := range args {
		if i > 0 {
			b.WriteString(", ")
		}
		if s, ok := a.(string); ok {
			fmt.Fprintf(&b, "%q", s)
			continue
		}
		fmt.Fprint(&b, a)
	}
	b.WriteByte(')')
	return &Error{Pkg: pkg, Call: b.String(), Want: want}
}

// Check panics with New(pkg, name, want, args...) unless ok. Options of
// constructors that cannot otherwise fail call it while they are applied,
// so the panic comes from the constructor.
func Check(ok bool, pkg, name, want string, args ...any) {
	if !ok {
		panic(New(pkg, name, want, args...))
	}
}

// Set applies an option whose zero value means its default: a zero v
// leaves *dst (the default) as it is; any other v is stored when ok and
// panics as Check does when not, with args in the message (v itself when
// args is empty).
func Set[T comparable](dst *T, v T, ok bool, pkg, name, want string, args ...any) {
	var zero T
	if v == zero {
		return
	}
	if len(args) == 0 {
		args = []any{v}
	}
	Check(ok, pkg, name, want, args...)
	*dst = v
}
