package loopback

import "github.com/levee-dev/levee/tools/backend"

// extra holds the protections registered by HijackWith, consulted by the
// backend child. It is set once, before any child role runs.
var extra map[string]backend.Wrap

// HijackWith is Hijack for a program that adds protections of its own: a
// backend child started with Config.Protection set to one of wraps' names
// serves behind that Wrap (backend.Options.Extra). Every process of the
// program must register the same wraps, so call it first thing in main
// (or TestMain) in place of Hijack. It returns false at once in the
// parent.
func HijackWith(wraps map[string]backend.Wrap) bool {
	extra = wraps
	return Hijack()
}
