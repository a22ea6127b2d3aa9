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
// a loop and at the entry of every function that calls others, and the
// guest traps when it runs out; each export is
// wrapped so that a call from the host starts with Options.Fuel units
// (shared by a whole batch) while calls inside the module do not refill it.
// An infinite loop or runaway recursion therefore traps after a bounded
// amount of work and the process never stalls.
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
package wasmclass
