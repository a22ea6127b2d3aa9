//go:build !linux

package affinity

import "fmt"

// Pin is not supported on this platform: it returns an error wrapping
// ErrNotSupported.
func Pin(cpu int) error {
	return fmt.Errorf("affinity: pin to cpu %d: %w", cpu, ErrNotSupported)
}

// Available is not supported on this platform: it returns an error wrapping
// ErrNotSupported.
func Available() ([]int, error) {
	return nil, fmt.Errorf("affinity: read affinity mask: %w", ErrNotSupported)
}
