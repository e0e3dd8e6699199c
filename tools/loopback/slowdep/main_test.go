package slowdep

import (
	"os"
	"testing"

	"github.com/levee-dev/levee/tools/loopback"
)

func TestMain(m *testing.M) {
	if loopback.HijackWith(Wraps()) {
		return
	}
	os.Exit(m.Run())
}
