//go:build linux

package affinity

import (
	"errors"
	"runtime"
	"slices"
	"strings"
	"testing"
)

func TestAvailableNotEmpty(t *testing.T) {
	cpus, err := Available()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) == 0 || len(cpus) > runtime.NumCPU()*2 {
		t.Fatalf("Available() = %v", cpus)
	}
	if !slices.IsSorted(cpus) {
		t.Fatalf("Available() = %v is not sorted", cpus)
	}
}

func TestPinRestrictsThread(t *testing.T) {
	cpus, err := Available()
	if err != nil {
		t.Fatal(err)
	}
	target := cpus[len(cpus)-1]
	errc := make(chan error, 1)
	go func() {
		// This goroutine's thread stays pinned and locked; it exits with the
		// goroutine, so the runtime discards it.
		if err := Pin(target); err != nil {
			errc <- err
			return
		}
		mask, err := maskOf(0)
		if err != nil {
			errc <- err
			return
		}
		if !slices.Equal(mask, []int{target}) {
			errc <- errors.New("thread mask after Pin is " + FormatList(mask) + ", want only the target")
			return
		}
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	after, err := Available()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(after, cpus) {
		t.Fatalf("process mask changed by Pin: %v, was %v", after, cpus)
	}
}

func TestValidateRefusesMissingCPU(t *testing.T) {
	cpus, err := Available()
	if err != nil {
		t.Fatal(err)
	}
	if err := Validate(cpus); err != nil {
		t.Fatalf("Validate(Available()) = %v", err)
	}
	missing := cpus[len(cpus)-1] + 1
	err = Validate([]int{missing})
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "this process may use "+FormatList(cpus)) {
		t.Fatalf("Validate([%d]) = %v", missing, err)
	}
}

func TestPinUnavailableCPUFails(t *testing.T) {
	cpus, err := Available()
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- Pin(cpus[len(cpus)-1] + 1000) }()
	if err := <-errc; err == nil {
		t.Fatal("Pin to a cpu the machine does not have succeeded")
	}
}
