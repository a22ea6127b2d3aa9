//go:build unix

package boundedfile

import (
	"os"
	"syscall"
)

// openNonBlocking opens path without waiting for a FIFO's writer.
func openNonBlocking(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
}
