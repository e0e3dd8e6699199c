package main

import (
	"fmt"
	"os"
	"os/exec"
)

// goodput runs the loopback goodput comparison and returns its table.
func goodput() (string, error) {
	cmd := exec.Command("go", "test", "-run", "^TestGoodput$", "-count", "1", "-timeout", "15m", "-v", "./goodput")
	cmd.Stderr = os.Stderr
	cmd.Env = append(os.Environ(), "LEVEE_BENCH_GOODPUT=1")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("goodput comparison: %w\n%s", err, out)
	}
	b, err := os.ReadFile("goodput/table.md")
	if err != nil {
		return "", fmt.Errorf("goodput comparison wrote no table: %w", err)
	}
	return string(b), nil
}
