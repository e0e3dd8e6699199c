package fleetredis

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// server is a redis-server of the test's own on a loopback port, with no
// persistence, in a temporary directory; it is killed when the test ends.
type server struct {
	t    testing.TB
	port int
	dir  string
	cmd  *exec.Cmd
	// ready is when the server last answered its first PING.
	ready time.Time
}

// quiet drops go-redis's own log lines (failed dials while a test has
// stopped its server on purpose).
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	os.Exit(m.Run())
}

// startRedis starts a redis-server, or skips the test when none is
// installed (unless LEVEE_REQUIRE_REDIS is set, as in CI).
func startRedis(t testing.TB) *server {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("LEVEE_REQUIRE_REDIS") != "" {
			t.Fatalf("redis-server not found and LEVEE_REQUIRE_REDIS is set: %v", err)
		}
		t.Skip("redis-server not installed (apt-get install redis-server)")
	}
	s := &server{t: t, dir: t.TempDir(), port: freePort(t)}
	s.start()
	t.Cleanup(s.stop)
	return s
}

func freePort(t testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func (s *server) addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs redis-server on s.port and waits (at most 10 s) until it
// answers PING.
func (s *server) start() {
	s.t.Helper()
	s.cmd = exec.Command("redis-server",
		"--port", strconv.Itoa(s.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", s.dir, "--logfile", filepath.Join(s.dir, "redis.log"), "--protected-mode", "no")
	if err := s.cmd.Start(); err != nil {
		s.t.Fatalf("redis-server: %v", err)
	}
	c := redis.NewClient(&redis.Options{Addr: s.addr(), MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			s.ready = time.Now()
			return
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
			s.t.Fatalf("redis-server on %s did not answer within 10 s: %v\n%s", s.addr(), err, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop kills the server and waits for it to exit.
func (s *server) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

func (s *server) client(t testing.TB) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr: s.addr(), DialTimeout: 200 * time.Millisecond,
		ReadTimeout: 200 * time.Millisecond, WriteTimeout: 200 * time.Millisecond, MaxRetries: -1,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

func (s *server) String() string { return fmt.Sprintf("redis-server on %s", s.addr()) }
