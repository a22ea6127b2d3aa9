package affinity

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Errors returned by this package.
var (
	// ErrNotSupported is wrapped by errors from platforms without thread
	// affinity.
	ErrNotSupported = errors.New("affinity: not supported on this platform")
	// ErrUnavailable is wrapped by Validate's error for a CPU the process may
	// not use.
	ErrUnavailable = errors.New("not available")
	// ErrBadList is wrapped by ParseList's errors.
	ErrBadList = errors.New("affinity: bad cpu list")
)

// maxCPU bounds CPU numbers accepted by ParseList, so that a typo such as
// "0-4000000" fails instead of allocating a huge slice.
const maxCPU = 1 << 16

// ParseList parses a CPU list in the kernel's format ("0-3,8,10-11"): comma
// separated CPU numbers and inclusive ranges. The result is sorted and free of
// duplicates. An empty (or all-blank) list yields an empty slice.
func ParseList(list string) ([]int, error) {
	var cpus []int
	if strings.TrimSpace(list) == "" {
		return cpus, nil
	}
	for _, part := range strings.Split(list, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		first, err := parseCPU(lo)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %q: %w", ErrBadList, list, part, err)
		}
		last := first
		if isRange {
			if last, err = parseCPU(hi); err != nil {
				return nil, fmt.Errorf("%w %q: %q: %w", ErrBadList, list, part, err)
			}
			if last < first {
				return nil, fmt.Errorf("%w %q: range %q is reversed", ErrBadList, list, part)
			}
		}
		for c := first; c <= last; c++ {
			cpus = append(cpus, c)
		}
	}
	slices.Sort(cpus)
	return slices.Compact(cpus), nil
}

func parseCPU(s string) (int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, errors.New("empty cpu number")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q is not a cpu number", s)
	}
	if n >= maxCPU {
		return 0, fmt.Errorf("cpu %d is out of range (max %d)", n, maxCPU-1)
	}
	return n, nil
}

// FormatList formats CPUs in the kernel's list format ("0-3,8"). The input
// need not be sorted.
func FormatList(cpus []int) string {
	s := slices.Clone(cpus)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Validate returns an error naming the first CPU in cpus that this process
// may not use (see Available), e.g.
//
//	affinity: cpu 7 not available (this process may use 0-1)
func Validate(cpus []int) error {
	avail, err := Available()
	if err != nil {
		return err
	}
	return validateAgainst(cpus, avail)
}

func validateAgainst(cpus, avail []int) error {
	for _, c := range cpus {
		if _, found := slices.BinarySearch(avail, c); !found {
			return fmt.Errorf("affinity: cpu %d %w (this process may use %s)", c, ErrUnavailable, FormatList(avail))
		}
	}
	return nil
}
