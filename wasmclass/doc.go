// Package wasmclass runs psp request classifiers: WebAssembly modules that
// map a request payload to a request type, following the ABI in sdk/ABI.md.
//
// # Threat model
//
// A classifier is untrusted code from a tenant. Whatever valid or invalid
// module it uploads, the host must spend a bounded, small amount of time
// and memory on it, at load and per packet, never stall or crash, and send
// the tenant's packets to UNKNOWN when the module misbehaves. Bugs in
// wazero's compiler and in the Go runtime are outside this model.
//
// # Loading
//
// Load is one pipeline, each stage taking the previous one's result:
//
//  1. decode (internal/wasmbin): a decoder of the module structure that
//     checks Options.Bounds (functions, locals, types, imports, segments,
//     custom sections, body size) as it reads, before allocating anything
//     for a count, and never panics;
//  2. validate: ABI v1 exports and signatures, imports (psp's own WASI
//     functions only, see wasi.go), memory and table limits, type names
//     (at most MaxTypeName bytes each, MaxTypeNames in all), custom
//     sections (only "name" goes on, the rest is dropped);
//  3. instrument (internal/fuel): fuel, the call-stack account and the
//     export wrappers; nesting depth, br_table targets and locals times
//     blocks are bounded here;
//  4. encode: element and data sections are written back byte for byte,
//     so every Wasm 2.0 segment form and table index survives;
//  5. compile: at most SetCompileConcurrency compilations at once in the
//     process (all Hosts together); with Options.CompileInChild, in a child
//     process (the running executable, see RunCompileChild) under limits
//     the parent sets before sending it the module: address space
//     (Options.CompileMemory), CPU time (Options.CompileTimeout, rounded up
//     to a second) and 32 open files, a timeout (Options.CompileTimeout)
//     and a parent-death signal; the parent then loads the child's work
//     from a file compilation cache;
//  6. initialise: one instance runs the start function and _initialize
//     once, under Options.InitFuel, and reads the ABI constants; its memory
//     and globals become the snapshot every later instance starts from.
//
// # Bounded execution
//
// Compiled Wasm cannot be interrupted cheaply (wazero's
// WithCloseOnContextDone costs more per call than a whole classification),
// so every module is rewritten at load time (internal/fuel) to pay fuel
// from a global, the tank, and trap when it is spent. Fuel is time: the
// cost model weighs every instruction class, memory.grow, bulk and table
// instructions and every host function by its measured time (by argument
// size where the work grows with it), in units of an empty loop iteration;
// BenchmarkAdversarial runs one module per class and checks that none costs
// more than twice an empty loop per unit. The default budget (Options.Fuel,
// 10^6 units) is shared by a batch. Each export is wrapped so that a call
// from the host starts with a full budget while calls inside the module do
// not refill it; the budget comes in slices (fuel.SliceUnits) with an exit
// to the host between them, where the Go runtime can stop the goroutine for
// a garbage collection.
//
// Behind the fuel, Options.TimeLimit bounds a call's wall-clock time: a
// watchdog goroutine per module stops a call running longer (it traps at
// its next check), counts a FaultTime and disables the module until it is
// replaced. The call stack is priced too: a call pays for the values its
// caller keeps live across it, and functions whose depth cannot be known at
// load (recursion, indirect calls) pay two units per byte of their frame at
// entry and trap past Options.StackLimit or the bytes the budget buys,
// whichever is smaller (BenchmarkStackCalls).
//
// # Faults
//
// Classification never returns an error. A trap, a fuel trap, a call over
// the time limit, a batch that returns the wrong count or a type outside
// 0..N-1 sends the packets concerned to 0 (UNKNOWN) and is counted per kind
// (FaultCounts). After a trap the instance switches to a spare prepared from
// the snapshot (a guest stopped half-way may have left its memory
// inconsistent). The circuit breaker belongs to the module version:
// Options.BreakerThreshold faulting calls within Options.BreakerWindow open
// it; it then refuses calls for a backoff that doubles at each opening, up
// to Options.BreakerMaxBackoff, and starts over only after the breaker has
// stayed closed for Options.BreakerReset (a crash-loop backoff, as Envoy's).
// With Options.Reload (HostSpec.Fail FailReload, Envoy's FAIL_RELOAD) the
// breaker counts only crashes, faults of an instance that had answered no
// call yet: a module that faults on some requests costs those requests
// only, each next call running on a fresh instance.
//
// # Hot swap
//
// A Host runs one classifier; its types are the module's own ids, up to
// HostSpec.MaxTypes-1, named "name/type". Host.Swap loads a new module off
// the hot path and publishes it atomically; each Caller switches at its
// next batch, so every packet is classified by exactly one version. A
// newer swap cancels older ones still loading. Status reports each
// version's SHA-256, size and load time, and Host.Rollback swaps the
// previous version back in. psp's server gives each tenant a Host of its
// own; package dispatcher routes packets to tenants and maps their type
// ids into the policy's.
//
// # Concurrency and ownership
//
// Module and Host are safe for concurrent use. Instance and Caller are not:
// create one per goroutine (Module.NewInstance, Host.NewCaller); the
// goroutine that created one closes it. Close Instances before their Module
// and Callers before their Host; a swapped-out module is closed by the Host
// once the last Caller using it has switched. Closing a Module or Host while
// instances still run makes their later calls fault (UNKNOWN), never crash.
//
// # Hot path
//
// Instance.ClassifyBatch and Caller.ClassifyBatch allocate nothing: payloads
// are copied into a cached view of the guest memory (refreshed when the
// guest grows its memory) and the guest is called through
// api.Function.CallWithStack with a reused stack, once per batch of up to
// MaxBatch packets. The breaker costs one atomic load per batch.
//
// # Limits
//
// What the sandbox does not bound, or bounds loosely:
//
//   - The cost model is measured on one kind of machine. On another, the
//     ratios move; BenchmarkAdversarial says by how much, and the time
//     limit catches a model that is far off.
//   - Without Options.CompileInChild, compilation runs in the process:
//     CompileTimeout stops the wait, not the compiler, and its memory is
//     not bounded. psp serve compiles in a child.
//   - Table contents written by the start function or _initialize are not
//     part of the snapshot: instances start with the tables the element
//     segments give.
//   - Instances of a module allocate their whole memory limit up front
//     (growing never copies); the operating system commits pages when they
//     are touched.
package wasmclass
