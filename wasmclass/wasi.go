package wasmclass

import (
	"context"
	"encoding/binary"
	"math/rand/v2"
	"sort"
	"strings"
	"sync/atomic"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"

	"github.com/persephone-go/psp/wasmclass/internal/fuel"
)

// psp provides its own wasi_snapshot_preview1: the few functions the SDK
// languages' runtimes import (Go's wasip1 runtime and the os, fmt and time
// packages), each doing a bounded amount of work that the fuel model
// prices. There are no files, no arguments, no environment and no real
// clock:
//
//   - args_*, environ_*: empty.
//   - clock_time_get: a virtual clock per module, which advances by 1 µs
//     per reading and jumps to the deadline of a poll_oneoff clock
//     subscription (sleeping takes no time). Classifiers get no timer to
//     measure their neighbours with.
//   - fd_write to stdout or stderr: discarded (the iovecs are added up,
//     at most wasiMaxIOVecs of them); fd_read of stdin: end of file.
//   - fd_fdstat_get, fd_filestat_get on 0..2: a character device.
//   - fd_close, fd_seek, fd_prestat_*, path_filestat_get, path_open, and
//     any other descriptor: EBADF at once, without reading any argument.
//   - poll_oneoff: at most wasiMaxIOVecs subscriptions, each answered at
//     once (clocks fire, stdio is ready, other descriptors get EBADF).
//   - random_get: bytes from the Go runtime's generator.
//   - proc_exit: ends the call (the instance is replaced).
//   - sched_yield: returns.
//
// A module importing anything else is refused at load.

// WASI errno values.
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoSpipe   = 70
)

// wasiMaxIOVecs caps the iovecs of fd_write and the subscriptions of
// poll_oneoff (POSIX's IOV_MAX).
const wasiMaxIOVecs = 1024

// wasiEpoch is the virtual realtime clock's start: 2020-01-01T00:00:00Z.
const wasiEpoch = 1577836800 * 1e9

// wasiFunc is one function of psp's WASI.
type wasiFunc struct {
	name    string
	params  []api.ValueType
	results []api.ValueType
	// cost is what a call costs (fuel.ImportCost); fn implements it.
	cost fuel.ImportCost
	fn   func(w *wasiState, ctx context.Context, mod api.Module, stack []uint64)
}

// wasiState is the state psp's WASI keeps per module: the virtual clock.
type wasiState struct {
	clock atomic.Int64 // ns since start
}

var (
	valI32 = api.ValueTypeI32
	valI64 = api.ValueTypeI64
)

// hostCallTicks is the fixed cost of a call to a host function: the exit
// from compiled code to Go and back (measured by BenchmarkAdversarial's
// host-call classes).
const hostCallTicks = 64 * fuel.TicksPerUnit

func ebadf(*wasiState, context.Context, api.Module, []uint64) {}

// wasiFuncs lists psp's WASI, by name.
var wasiFuncs = map[string]wasiFunc{}

func init() {
	none := fuel.ImportCost{Ticks: hostCallTicks, Param: -1}
	add := func(f wasiFunc) {
		if f.cost == (fuel.ImportCost{}) {
			f.cost = none
		}
		wasiFuncs[f.name] = f
	}
	badf := func(name string, params ...api.ValueType) {
		add(wasiFunc{name: name, params: params, results: []api.ValueType{valI32}, fn: func(_ *wasiState, _ context.Context, _ api.Module, s []uint64) {
			s[0] = errnoBadf
		}})
	}
	empty := func(name string) { // (a, b valI32) -> errno: nothing to write
		add(wasiFunc{name: name, params: []api.ValueType{valI32, valI32}, results: []api.ValueType{valI32}, fn: func(_ *wasiState, _ context.Context, _ api.Module, s []uint64) {
			s[0] = errnoSuccess
		}})
	}
	sizes := func(name string) { // (count_ptr, size_ptr valI32) -> errno: 0, 0
		add(wasiFunc{name: name, params: []api.ValueType{valI32, valI32}, results: []api.ValueType{valI32}, fn: func(_ *wasiState, _ context.Context, mod api.Module, s []uint64) {
			mem := mod.Memory()
			if !mem.WriteUint32Le(uint32(s[0]), 0) || !mem.WriteUint32Le(uint32(s[1]), 0) {
				s[0] = errnoFault
				return
			}
			s[0] = errnoSuccess
		}})
	}
	empty("args_get")
	empty("environ_get")
	sizes("args_sizes_get")
	sizes("environ_sizes_get")
	add(wasiFunc{name: "clock_time_get", params: []api.ValueType{valI32, valI64, valI32}, results: []api.ValueType{valI32}, fn: wasiClockTimeGet})
	add(wasiFunc{name: "fd_write", params: []api.ValueType{valI32, valI32, valI32, valI32}, results: []api.ValueType{valI32}, fn: wasiFdWrite,
		cost: fuel.ImportCost{Ticks: hostCallTicks, Param: 2, PerArg: fuel.Sized{Mul: 2, Cap: wasiMaxIOVecs}}})
	add(wasiFunc{name: "fd_read", params: []api.ValueType{valI32, valI32, valI32, valI32}, results: []api.ValueType{valI32}, fn: wasiFdRead})
	add(wasiFunc{name: "fd_fdstat_get", params: []api.ValueType{valI32, valI32}, results: []api.ValueType{valI32}, fn: wasiFdstatGet,
		cost: fuel.ImportCost{Ticks: 2 * hostCallTicks, Param: -1}})
	add(wasiFunc{name: "fd_filestat_get", params: []api.ValueType{valI32, valI32}, results: []api.ValueType{valI32}, fn: wasiFilestatGet,
		cost: fuel.ImportCost{Ticks: 2 * hostCallTicks, Param: -1}})
	add(wasiFunc{name: "fd_fdstat_set_flags", params: []api.ValueType{valI32, valI32}, results: []api.ValueType{valI32}, fn: func(_ *wasiState, _ context.Context, _ api.Module, s []uint64) {
		if uint32(s[0]) > 2 {
			s[0] = errnoBadf
			return
		}
		s[0] = errnoSuccess
	}})
	add(wasiFunc{name: "fd_seek", params: []api.ValueType{valI32, valI64, valI32, valI32}, results: []api.ValueType{valI32}, fn: func(_ *wasiState, _ context.Context, _ api.Module, s []uint64) {
		if uint32(s[0]) > 2 {
			s[0] = errnoBadf
			return
		}
		s[0] = errnoSpipe
	}})
	badf("fd_close", valI32)
	badf("fd_prestat_get", valI32, valI32)
	badf("fd_prestat_dir_name", valI32, valI32, valI32)
	badf("path_filestat_get", valI32, valI32, valI32, valI32, valI32)
	badf("path_open", valI32, valI32, valI32, valI32, valI32, valI64, valI64, valI32, valI32)
	add(wasiFunc{name: "poll_oneoff", params: []api.ValueType{valI32, valI32, valI32, valI32}, results: []api.ValueType{valI32}, fn: wasiPollOneoff,
		cost: fuel.ImportCost{Ticks: hostCallTicks, Param: 2, PerArg: fuel.Sized{Mul: 8, Cap: wasiMaxIOVecs}}})
	add(wasiFunc{name: "random_get", params: []api.ValueType{valI32, valI32}, results: []api.ValueType{valI32}, fn: wasiRandomGet,
		cost: fuel.ImportCost{Ticks: hostCallTicks, Param: 1, PerArg: fuel.Sized{Mul: 3, Shift: 1}}})
	add(wasiFunc{name: "proc_exit", params: []api.ValueType{valI32}, fn: func(_ *wasiState, _ context.Context, _ api.Module, s []uint64) {
		panic(sys.NewExitError(uint32(s[0])))
	}})
	add(wasiFunc{name: "sched_yield", results: []api.ValueType{valI32}, fn: func(_ *wasiState, _ context.Context, _ api.Module, s []uint64) {
		s[0] = errnoSuccess
	}})
}

// wasiNames returns the names of psp's WASI functions, sorted.
func wasiNames() string {
	names := make([]string, 0, len(wasiFuncs))
	for n := range wasiFuncs {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// wasiCosts returns the fuel cost of every function of psp's WASI, keyed
// for fuel.Config.Imports.
func wasiCosts() map[string]fuel.ImportCost {
	costs := make(map[string]fuel.ImportCost, len(wasiFuncs))
	for n, f := range wasiFuncs {
		costs[wasiModule+"."+n] = f.cost
	}
	return costs
}

// instantiateWASI adds psp's WASI to rt, with a virtual clock of its own.
func instantiateWASI(ctx context.Context, rt wazero.Runtime) error {
	w := &wasiState{}
	b := rt.NewHostModuleBuilder(wasiModule)
	for _, f := range wasiFuncs {
		fn := f.fn
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				fn(w, ctx, mod, stack)
			}), f.params, f.results).
			Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

func wasiClockTimeGet(w *wasiState, _ context.Context, mod api.Module, s []uint64) {
	now := w.clock.Add(1000)
	switch uint32(s[0]) {
	case 0: // realtime
		now += wasiEpoch
	case 1, 2, 3: // monotonic, process and thread CPU time
	default:
		s[0] = errnoInval
		return
	}
	if !mod.Memory().WriteUint64Le(uint32(s[2]), uint64(now)) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

func wasiFdWrite(_ *wasiState, _ context.Context, mod api.Module, s []uint64) {
	fd, iovs, n, resPtr := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	if fd != 1 && fd != 2 {
		s[0] = errnoBadf
		return
	}
	if n > wasiMaxIOVecs {
		s[0] = errnoInval
		return
	}
	mem := mod.Memory()
	vec, ok := mem.Read(iovs, n*8)
	if !ok {
		s[0] = errnoFault
		return
	}
	var total uint32
	for i := uint32(0); i < n; i++ {
		total += binary.LittleEndian.Uint32(vec[8*i+4:])
	}
	if !mem.WriteUint32Le(resPtr, total) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

func wasiFdRead(_ *wasiState, _ context.Context, mod api.Module, s []uint64) {
	if uint32(s[0]) != 0 {
		s[0] = errnoBadf
		return
	}
	if !mod.Memory().WriteUint32Le(uint32(s[3]), 0) { // end of file
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

// fdstat and filestat of stdio: a character device.
const wasiCharDevice = 2

func wasiFdstatGet(_ *wasiState, _ context.Context, mod api.Module, s []uint64) {
	if uint32(s[0]) > 2 {
		s[0] = errnoBadf
		return
	}
	var st [24]byte
	st[0] = wasiCharDevice
	if !mod.Memory().Write(uint32(s[1]), st[:]) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

func wasiFilestatGet(_ *wasiState, _ context.Context, mod api.Module, s []uint64) {
	if uint32(s[0]) > 2 {
		s[0] = errnoBadf
		return
	}
	var st [64]byte
	st[16] = wasiCharDevice
	if !mod.Memory().Write(uint32(s[1]), st[:]) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

// wasiPollOneoff answers every subscription at once: a clock fires (the
// virtual clock jumps to its deadline), stdio is ready, any other
// descriptor gets EBADF.
func wasiPollOneoff(w *wasiState, _ context.Context, mod api.Module, s []uint64) {
	in, out, n, resPtr := uint32(s[0]), uint32(s[1]), uint32(s[2]), uint32(s[3])
	if n == 0 || n > wasiMaxIOVecs {
		s[0] = errnoInval
		return
	}
	mem := mod.Memory()
	subs, ok1 := mem.Read(in, n*48)
	events, ok2 := mem.Read(out, n*32)
	if !ok1 || !ok2 {
		s[0] = errnoFault
		return
	}
	var latest int64
	for i := uint32(0); i < n; i++ {
		sub := subs[48*i : 48*i+48]
		ev := events[32*i : 32*i+32]
		userdata := binary.LittleEndian.Uint64(sub)
		tag := sub[8]
		clear(ev)
		binary.LittleEndian.PutUint64(ev, userdata)
		ev[10] = tag
		switch tag {
		case 0: // clock: relative timeout (flags bit 0 clear) or absolute
			timeout := int64(binary.LittleEndian.Uint64(sub[24:]))
			if sub[40]&1 == 0 {
				timeout += w.clock.Load()
			} else if binary.LittleEndian.Uint32(sub[16:]) == 0 {
				timeout -= wasiEpoch
			}
			latest = max(latest, timeout)
		case 1, 2: // fd_read, fd_write
			if fd := binary.LittleEndian.Uint32(sub[16:]); fd > 2 {
				binary.LittleEndian.PutUint16(ev[8:], errnoBadf)
			}
		default:
			binary.LittleEndian.PutUint16(ev[8:], errnoInval)
		}
	}
	for {
		now := w.clock.Load()
		if latest <= now || w.clock.CompareAndSwap(now, latest) {
			break
		}
	}
	if !mem.WriteUint32Le(resPtr, n) {
		s[0] = errnoFault
		return
	}
	s[0] = errnoSuccess
}

func wasiRandomGet(_ *wasiState, _ context.Context, mod api.Module, s []uint64) {
	buf, ok := mod.Memory().Read(uint32(s[0]), uint32(s[1]))
	if !ok {
		s[0] = errnoFault
		return
	}
	if len(buf) >= 256 {
		// A generator of its own, seeded from the runtime's: several
		// times faster per byte than the runtime's per-call path.
		var seed [32]byte
		for k := 0; k < 32; k += 8 {
			binary.LittleEndian.PutUint64(seed[k:], rand.Uint64())
		}
		_, _ = rand.NewChaCha8(seed).Read(buf)
		s[0] = errnoSuccess
		return
	}
	for len(buf) >= 8 {
		binary.LittleEndian.PutUint64(buf, rand.Uint64())
		buf = buf[8:]
	}
	if len(buf) > 0 {
		var tail [8]byte
		binary.LittleEndian.PutUint64(tail[:], rand.Uint64())
		copy(buf, tail[:])
	}
	s[0] = errnoSuccess
}

// wasiSignature reports whether an import's type matches f's.
func (f wasiFunc) matches(params, results []byte) bool {
	if len(params) != len(f.params) || len(results) != len(f.results) {
		return false
	}
	for i, p := range params {
		if p != f.params[i] {
			return false
		}
	}
	for i, r := range results {
		if r != f.results[i] {
			return false
		}
	}
	return true
}
