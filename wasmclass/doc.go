// Package wasmclass runs psp request classifiers: WebAssembly modules that
// map a request payload to a request type, following the ABI in sdk/ABI.md.
//
// # Loading
//
// Load validates a module against ABI v1 (exports and their signatures,
// imports, memory declaration, size), instruments it with fuel (see below),
// compiles it with wazero's compiler engine in a wazero.Runtime of its own
// and reads its constants from a probe instance. Errors name what is wrong
// and wrap one of the package's sentinel errors.
//
// # Bounded execution
//
// Compiled Wasm cannot be interrupted without
// wazero.RuntimeConfig.WithCloseOnContextDone, which costs about a
// microsecond per call. Instead every module is rewritten at load time
// (internal/fuel): a mutable global is decremented on every branch back to
// a loop, at the entry of every function that calls others or is longer
// than a few dozen bytes, before every bulk memory or table instruction
// and before every call to a WASI function whose work grows with an
// argument; the guest traps when it runs out. Charges grow with what they
// pay for: the code an iteration or a call can run (a call to a short
// function that is not metered itself counts as its code), the length a
// bulk instruction handles, the bytes or buffers a WASI call handles. Each
// export is wrapped so that a call from the host starts with Options.Fuel
// units (shared by a whole batch) while calls inside the module do not
// refill it. An infinite loop or runaway recursion therefore traps after a
// bounded amount of work (measured: about 1 ms for the default budget, a
// few ms for the worst hostile patterns in the tests) and the process never
// stalls. Load also refuses what would cost host memory out of proportion
// to the module: functions declaring more than fuel.MaxLocals locals and
// tables of more than MaxTableElements elements (a table without a
// maximum gets one, so table.grow fails past it).
//
// # Faults
//
// Classification never returns an error. A trap, a fuel trap, a batch that
// returns the wrong count or a type outside 0..N-1 sends the packets
// concerned to 0 (UNKNOWN) and is counted per kind (FaultCounts). After a
// trap the instance is re-created before its next call, because a guest
// stopped half-way may have left its memory inconsistent. After
// Options.BreakerThreshold consecutive faulting calls an instance's circuit
// breaker opens: its next Options.BreakerBackoff packets go to UNKNOWN
// without calling the guest, then one call is tried; a fault doubles the
// backoff (up to Options.BreakerMaxBackoff), a success closes the breaker.
//
// # Tenants and hot swap
//
// A Host holds several tenants, each with its own classifier (own runtime,
// shared compilation cache), selected by UDP destination port, with its
// types mapped into one global type space: 0 is UNKNOWN, then each tenant's
// range of TenantSpec.MaxTypes-1 ids. Host.Swap loads a new module off the
// hot path and publishes it atomically; each Caller switches at its next
// batch, so every packet is classified by exactly one version. A module
// that fails to load leaves the running one in place.
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
// MaxBatch packets.
//
// # Limits
//
// What the sandbox does not bound, or bounds loosely:
//
//   - Initialisation runs on the hot path after a trap. The start function
//     and _initialize get Options.InitFuel (default 100 times Options.Fuel)
//     and run for every instance, including the re-creation that follows a
//     trap, which happens inside the next ClassifyBatch. A module whose
//     initialisation burns most of that budget and whose calls then trap
//     costs one initialisation (measured: 80 ms for an infinite loop with the
//     default 10^8 units) per circuit-breaker retry; the breaker's backoff
//     bounds how often. Lower InitFuel for classifiers that need no runtime
//     start-up (everything but Go's wasip1).
//   - Fuel is an upper bound on work, not a measure: a unit stands for up
//     to CodeBytesPerUnit bytes of code (or BulkBytesPerUnit bytes of a bulk
//     instruction), so the time a budget buys depends on the code, from
//     about 1 ms (a tight loop) to a few ms (the test fixtures' worst cases:
//     long loop bodies, short leaf calls, bulk memory, random_get).
//   - Runaway recursion in a function that calls nothing but itself through
//     return_call is impossible only because wazero's default features
//     exclude tail calls (such modules fail to compile); the walker already
//     treats return_call and return_call_indirect as calls.
//   - Deep recursion within the budget uses host stack: wazero's stack
//     overflow trap bounds it (observed: ~160 ms and up to ~80 MiB for the
//     first overflow of an instance, released when the instance is
//     re-created).
//   - WASI functions other than random_get, fd_read, fd_write, fd_pread,
//     fd_pwrite and poll_oneoff are charged nothing beyond the call: they do
//     a bounded amount of work because the host provides no files, no
//     arguments, no environment, a discarding stdout and stderr, an empty
//     stdin and a sleep that returns at once. Giving WASI more (files, a
//     real clock or sleep) needs new charges.
package wasmclass
