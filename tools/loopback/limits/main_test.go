package limits

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if Hijack() {
		return
	}
	os.Exit(m.Run())
}
