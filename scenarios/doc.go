// Package scenarios holds the built-in scenarios of levee's simulator as
// committed YAML, embedded in the binary: `levee sim NAME` runs NAME.yaml,
// `levee sim NAME --show` prints it, and `levee sim -f FILE` runs a custom
// one written the same way (see package internal/sim for the fields).
package scenarios
