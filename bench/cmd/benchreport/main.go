// Command benchreport runs levee's side-by-side benchmarks and rewrites the
// tables in bench/README.md between their markers. Run it from bench/:
//
//	go run ./cmd/benchreport            # hot path, goodput and shapes, ~35 minutes
//	go run ./cmd/benchreport -hotpath   # hot path only, ~2 minutes
//	go run ./cmd/benchreport -shapes    # the other shapes of service only, ~25 minutes
//
// Every number in a table comes from the same run on the same machine; the
// tables state ratios (to a bare time.Now(), to the unprotected server)
// because absolute times on a shared machine do not repeat.
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/levee-dev/levee/tools/report"
)

func main() {
	hotOnly := flag.Bool("hotpath", false, "run only the hot-path benchmarks")
	shapesOnly := flag.Bool("shapes", false, "run only the comparison on other shapes of service (slow dependency, long requests, mixed criticality)")
	count := flag.Int("count", 5, "runs of each hot-path benchmark (the table shows the median)")
	readme := flag.String("readme", "README.md", "file whose marked sections are rewritten")
	flag.Parse()

	sections := map[string]string{}
	if !*shapesOnly {
		hot, err := hotPath(*count)
		if err != nil {
			fail(err)
		}
		sections["hotpath"] = hot
	}
	if !*hotOnly && !*shapesOnly {
		gp, err := goodput()
		if err != nil {
			fail(err)
		}
		sections["goodput"] = gp
	}
	if !*hotOnly {
		sh, err := shapes()
		if err != nil {
			fail(err)
		}
		sections["shapes"] = sh
	}
	sections["machine"] = machine()
	if err := rewrite(*readme, sections); err != nil {
		fail(err)
	}
	fmt.Println("benchreport: wrote", *readme)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "benchreport:", err)
	os.Exit(1)
}

func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				cpu = strings.TrimSpace(strings.SplitN(l, ":", 2)[1])
				break
			}
		}
	}
	return fmt.Sprintf("Measured %s on %s/%s, %d CPUs (%s), %s.",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), cpu, runtime.Version())
}

var benchLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op(?:\s+([\d.]+) B/op\s+(\d+) allocs/op)?`)

type result struct {
	ns     []float64
	allocs int
}

// hotPath runs the hotpath package's benchmarks count times and renders
// the median of each as a markdown table.
func hotPath(count int) (string, error) {
	cmd := exec.Command("go", "test", "-run", "^$", "-bench", ".", "-benchmem",
		"-count", strconv.Itoa(count), "./hotpath")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hot-path benchmarks: %w\n%s", err, out)
	}
	res, order := parseBench(out)
	if len(res) == 0 {
		return "", fmt.Errorf("hot-path benchmarks printed no results")
	}
	now := median(res["BenchmarkTimeNow"].ns)
	var b strings.Builder
	fmt.Fprintf(&b, "| benchmark | ns/op (median of %d) | ÷ time.Now() | allocs/op |\n|---|---:|---:|---:|\n", count)
	for _, name := range order {
		r := res[name]
		m := median(r.ns)
		ratio := "–"
		if now > 0 {
			ratio = fmt.Sprintf("%.2f", m/now)
		}
		fmt.Fprintf(&b, "| %s | %.1f | %s | %d |\n", strings.TrimPrefix(name, "Benchmark"), m, ratio, r.allocs)
	}
	return b.String(), nil
}

func parseBench(out []byte) (map[string]*result, []string) {
	res := map[string]*result{}
	var order []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		ns, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			continue
		}
		r, ok := res[m[1]]
		if !ok {
			r = &result{}
			res[m[1]] = r
			order = append(order, m[1])
		}
		r.ns = append(r.ns, ns)
		if m[4] != "" {
			r.allocs, _ = strconv.Atoi(m[4])
		}
	}
	return res, order
}

// median is report.Median without the spread.
func median(xs []float64) float64 {
	m, _, _ := report.Median(xs)
	return m
}

// rewrite replaces, for each section name, the text between
// "<!-- name:begin -->" and "<!-- name:end -->" in the file.
func rewrite(path string, sections map[string]string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	s := string(b)
	for name, body := range sections {
		begin, end := "<!-- "+name+":begin -->", "<!-- "+name+":end -->"
		i, j := strings.Index(s, begin), strings.Index(s, end)
		if i < 0 || j < i {
			return fmt.Errorf("%s has no %s … %s markers", path, begin, end)
		}
		s = s[:i+len(begin)] + "\n" + strings.TrimRight(body, "\n") + "\n" + s[j:]
	}
	return os.WriteFile(path, []byte(s), 0o644)
}
