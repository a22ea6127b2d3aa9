//go:build linux && cgo && dpdk

package dpdk

/*
#include <stdlib.h>
#include "psp_dpdk.h"
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// ringPair is a dataplane over a net_ring port built from two rings, for
// tests and benchmarks: frames injected on one ring are received, the
// frames the dataplane transmits (replies and ARP) are collected from the
// other.
type ringPair struct {
	*Dataplane
	rp      *C.struct_psp_ring_pair
	collect unsafe.Pointer // C buffer for collected frames
}

const maxFrame = 2048

// openRingPair opens a dataplane over a fresh ring pair. cfg.Device and
// cfg.PortID are ignored.
func openRingPair(cfg Config) (*ringPair, error) {
	cfg, err := cfg.start()
	if err != nil {
		return nil, err
	}
	var (
		rp      *C.struct_psp_ring_pair
		openErr error
	)
	eal.do(func() {
		cname := C.CString(eal.name("net_ring_psp"))
		defer C.free(unsafe.Pointer(cname))
		errbuf := newCErr()
		defer errbuf.free()
		if rp = C.psp_ring_pair_create(cname, C.uint16_t(min(cfg.Workers+1, C.RTE_PMD_RING_MAX_TX_RINGS)), errbuf.p, errbuf.n); rp == nil {
			openErr = fmt.Errorf("dpdk: ring pair: %s", errbuf)
		}
	})
	if openErr != nil {
		return nil, openErr
	}
	d, err := openPort(cfg, uint16(C.psp_ring_pair_port(rp)), "")
	if err != nil {
		eal.do(func() { C.psp_ring_pair_free(rp) })
		return nil, err
	}
	d.onClose = func() {
		C.psp_ring_pair_drain(rp)
		C.psp_ring_pair_free(rp)
	}
	return &ringPair{Dataplane: d, rp: rp, collect: C.malloc(maxFrame)}, nil
}

// inject queues frame for reception.
func (r *ringPair) inject(frame []byte) error {
	if len(frame) > maxFrame {
		return fmt.Errorf("inject: frame of %d bytes", len(frame))
	}
	cframe := C.CBytes(frame)
	defer C.free(cframe)
	if rc := C.psp_ring_pair_inject(r.rp, r.port, (*C.uint8_t)(cframe), C.uint16_t(len(frame))); rc != 0 {
		return fmt.Errorf("inject: %w", errnoError(rc))
	}
	return nil
}

// transmitted returns the next frame the dataplane transmitted, or nil.
func (r *ringPair) transmitted() ([]byte, error) {
	n := C.psp_ring_pair_collect(r.rp, (*C.uint8_t)(r.collect), maxFrame)
	switch {
	case n == 0:
		return nil, nil
	case n < 0:
		return nil, fmt.Errorf("collect: frame longer than %d bytes", maxFrame)
	}
	return C.GoBytes(r.collect, n), nil
}

// reflect turns up to max transmitted replies back into requests to the
// dataplane and returns how many.
func (r *ringPair) reflect(max int) int {
	return int(C.psp_ring_pair_reflect(r.rp, C.uint(max)))
}

// Close closes the dataplane and frees the rings.
func (r *ringPair) Close() error {
	err := r.Dataplane.Close()
	if r.collect != nil {
		C.free(r.collect)
		r.collect = nil
	}
	return err
}
