//go:build linux

package udp

import (
	"testing"

	"github.com/persephone-go/psp/nic"
)

// TestStageMovesStagedBuffersDown checks that when the pool is empty, stage
// fills the leading slots with buffers staged in later slots instead of
// receiving into fewer slots than it holds buffers for.
func TestStageMovesStagedBuffersDown(t *testing.T) {
	d, err := Open(Config{Addr: "127.0.0.1:0", Buffers: 8, Batch: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.stage(8); got != 8 { // all 8 buffers staged, pool empty
		t.Fatalf("stage(8) = %d", got)
	}
	// A receive of 3 consumed slots 0..2; the caller holds those buffers.
	var held []*nic.Buffer
	for i := range 3 {
		held = append(held, d.rx.bufs[i])
		d.rx.bufs[i] = nil
		d.rx.iovs[i].Base = nil
	}
	d.staged.Add(-3)
	if got := d.stage(8); got != 5 {
		t.Fatalf("stage(8) with 5 staged and an empty pool = %d, want 5", got)
	}
	for i := range 8 {
		if (d.rx.bufs[i] != nil) != (i < 5) {
			t.Fatalf("slot %d staged = %v", i, d.rx.bufs[i] != nil)
		}
		if b := d.rx.bufs[i]; b != nil && d.rx.iovs[i].Base != &b.Data[0] {
			t.Fatalf("slot %d iovec does not point at its buffer", i)
		}
	}
	if d.FreeBuffers() != 5 || int(d.staged.Load()) != 5 {
		t.Fatalf("FreeBuffers %d staged %d, want 5 and 5", d.FreeBuffers(), d.staged.Load())
	}
	d.Release(held...)
	if d.FreeBuffers() != 8 {
		t.Fatalf("FreeBuffers = %d after releasing, want 8", d.FreeBuffers())
	}
}
