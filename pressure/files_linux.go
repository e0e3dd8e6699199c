package pressure

import (
	"encoding/binary"
	"sync"
	"syscall"
)

// openFiles returns a reader of this process's open descriptors (the
// entries of /proc/self/fd, less the one the listing holds) and its
// RLIMIT_NOFILE soft limit. The directory entries are counted in a reused
// buffer, not turned into names.
func openFiles() func() (n, limit int64, err error) {
	var mu sync.Mutex
	buf := make([]byte, 16<<10)
	return func() (int64, int64, error) {
		var rl syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0, 0, err
		}
		mu.Lock()
		defer mu.Unlock()
		fd, err := syscall.Open("/proc/self/fd", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
		if err != nil {
			return 0, 0, err
		}
		defer syscall.Close(fd)
		var n int64
		for {
			m, err := syscall.ReadDirent(fd, buf)
			if err != nil {
				return 0, 0, err
			}
			if m <= 0 {
				break
			}
			n += countDirents(buf[:m])
		}
		return max(0, n-1), int64(min(rl.Cur, 1<<62)), nil
	}
}

// countDirents counts the linux_dirent64 records in buf other than "." and
// "..": each is d_ino (8 bytes), d_off (8), d_reclen (2), d_type (1) and
// the name, NUL-terminated.
func countDirents(buf []byte) int64 {
	var n int64
	for len(buf) >= 19 {
		reclen := int(binary.NativeEndian.Uint16(buf[16:18]))
		if reclen < 19 || reclen > len(buf) {
			break
		}
		name := buf[19:reclen]
		dot := len(name) >= 2 && name[0] == '.' && name[1] == 0
		dotdot := len(name) >= 3 && name[0] == '.' && name[1] == '.' && name[2] == 0
		if !dot && !dotdot {
			n++
		}
		buf = buf[reclen:]
	}
	return n
}
