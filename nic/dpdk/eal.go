//go:build linux && cgo && dpdk

package dpdk

/*
#include <stdlib.h>
#include "psp_dpdk.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// ealThread is the process's DPDK environment: rte_eal_init runs once, on a
// goroutine locked to its OS thread (which becomes the EAL main lcore), and
// that goroutine keeps the lock and runs every later control-plane call
// (device hot-plug, port set-up and tear-down) so they all happen on the main
// lcore. It is the one piece of process-wide state in the package: the EAL
// itself is process-wide.
type ealThread struct {
	mu    sync.Mutex
	args  []string // the arguments the EAL was initialised with
	err   error    // the initialisation error, permanent
	calls chan func()
	// names numbers the objects psp creates in the EAL's process-wide
	// namespaces (mempools, ring devices).
	names atomic.Uint64
}

var eal ealThread

// start initialises the EAL with args on first use. Later calls must pass
// the same arguments.
func (e *ealThread) start(args []string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err != nil {
		return e.err
	}
	if e.calls != nil {
		if !slices.Equal(args, e.args) {
			return fmt.Errorf("%w: already initialised with %q; the EAL starts once per process (add devices with Config.Device, or pass nil EAL)",
				ErrEAL, strings.Join(e.args, " "))
		}
		return nil
	}
	calls := make(chan func())
	done := make(chan error)
	go e.loop(slices.Clone(args), calls, done)
	if err := <-done; err != nil {
		e.err = err
		return err
	}
	e.args = slices.Clone(args)
	e.calls = calls
	return nil
}

// loop initialises the EAL on a locked thread and then serves calls on it
// for the life of the process. It never unlocks the thread: the EAL keeps
// per-thread state for its main lcore.
func (e *ealThread) loop(args []string, calls <-chan func(), done chan<- error) {
	runtime.LockOSThread()
	// The strings and argv stay allocated: the EAL may keep pointers into
	// them (program name, device arguments).
	argv := (**C.char)(C.calloc(C.size_t(len(args)+2), C.size_t(unsafe.Sizeof((*C.char)(nil)))))
	view := unsafe.Slice(argv, len(args)+2)
	view[0] = C.CString("psp")
	for i, a := range args {
		view[i+1] = C.CString(a)
	}
	errbuf := newCErr()
	rc := C.psp_eal_init(C.int(len(args)+1), argv, errbuf.p, errbuf.n)
	msg := errbuf.String()
	errbuf.free()
	if rc != 0 {
		done <- fmt.Errorf("%w: init with %q: %s (without hugepages pass --no-huge; a second process needs --no-shconf)",
			ErrEAL, strings.Join(args, " "), msg)
		// The thread stays locked: the EAL may have touched it.
		select {}
	}
	done <- nil
	for f := range calls {
		f()
	}
}

// name returns a process-unique DPDK object name starting with prefix.
func (e *ealThread) name(prefix string) string {
	return fmt.Sprintf("%s%d", prefix, e.names.Add(1))
}

// do runs f on the EAL main thread and waits for it.
func (e *ealThread) do(f func()) {
	e.mu.Lock()
	calls := e.calls
	e.mu.Unlock()
	finished := make(chan struct{})
	calls <- func() {
		defer close(finished)
		f()
	}
	<-finished
}

// cErr is a C buffer for error messages from C: no Go memory crosses into C.
type cErr struct {
	p *C.char
	n C.size_t
}

func newCErr() cErr {
	const n = 512
	return cErr{p: (*C.char)(C.calloc(n, 1)), n: n}
}

func (e cErr) String() string { return C.GoString(e.p) }

func (e cErr) free() { C.free(unsafe.Pointer(e.p)) }

// ealUsage returns the EAL's memzones and heap bytes in use, for tests
// that check Close gives back everything Open took (zeros before the EAL
// starts).
func ealUsage() (memzones, heapBytes uint64) {
	eal.mu.Lock()
	started := eal.calls != nil
	eal.mu.Unlock()
	if !started {
		return 0, 0
	}
	eal.do(func() {
		var mz, hb C.uint64_t
		C.psp_eal_usage(&mz, &hb)
		memzones, heapBytes = uint64(mz), uint64(hb)
	})
	return memzones, heapBytes
}
