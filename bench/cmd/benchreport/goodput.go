package main

import (
	"fmt"
	"os"
	"os/exec"
)

// goodput runs the loopback goodput comparison (package goodput's
// TestGoodput, about 6 minutes), streaming its log to stderr, and returns
// its table.
func goodput() (string, error) {
	return loopbackTable("TestGoodput", "LEVEE_BENCH_GOODPUT", "goodput/table.md", "15m")
}

// shapes runs the comparison on other shapes of service (TestShapes: a
// slow dependency, long requests, mixed criticality; about 25 minutes)
// and returns its tables.
func shapes() (string, error) {
	return loopbackTable("TestShapes", "LEVEE_BENCH_SHAPES", "goodput/shapes.md", "60m")
}

// loopbackTable runs test of package goodput with env=1, streaming its log
// to stderr, and returns the markdown it wrote to file.
func loopbackTable(test, env, file, timeout string) (string, error) {
	_ = os.Remove(file)
	cmd := exec.Command("go", "test", "-run", "^"+test+"$", "-count", "1", "-timeout", timeout, "-v", "./goodput")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), env+"=1")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w", test, err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("%s wrote no table: %w", test, err)
	}
	return string(b), nil
}
