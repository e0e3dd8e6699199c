package main

import (
	"fmt"
	"os"
	"os/exec"
)

// goodput runs the loopback goodput comparison (package goodput, about 6
// minutes), streaming its log to stderr, and returns its table.
func goodput() (string, error) {
	_ = os.Remove("goodput/table.md")
	cmd := exec.Command("go", "test", "-run", "^TestGoodput$", "-count", "1", "-timeout", "15m", "-v", "./goodput")
	cmd.Stdout = os.Stderr
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "LEVEE_BENCH_GOODPUT=1")
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("goodput comparison: %w", err)
	}
	b, err := os.ReadFile("goodput/table.md")
	if err != nil {
		return "", fmt.Errorf("goodput comparison wrote no table: %w", err)
	}
	return string(b), nil
}
