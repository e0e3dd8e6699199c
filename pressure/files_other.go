//go:build !linux

package pressure

import "errors"

func openFiles() func() (n, limit int64, err error) {
	return func() (int64, int64, error) {
		return 0, 0, errors.New("pressure: open descriptors are counted on Linux only; use WithCountSource")
	}
}
