package lab

import (
	"os"
	"testing"

	"github.com/levee-dev/levee/tools/loopback"
)

func TestMain(m *testing.M) {
	if loopback.Hijack() {
		return
	}
	os.Exit(m.Run())
}
