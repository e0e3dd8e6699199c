package grpclab

import (
	"os"
	"testing"

	"github.com/levee-dev/levee/tools/loopback"
)

func TestMain(m *testing.M) {
	if Hijack() || loopback.Hijack() {
		return
	}
	os.Exit(m.Run())
}
