// Package memnic is an in-memory nic.Dataplane for tests and benchmarks: no
// sockets, no copies beyond the one into the pool buffer, no allocation per
// packet.
//
// Packets enter in one of two ways:
//
//   - Injection: Inject, InjectPort and InjectBatch copy a payload into a
//     pool buffer and queue it for Recv; Feed does so at a given rate. They
//     are safe from any number of goroutines. When no buffer is free the
//     packet is dropped and counted (Stats.RxDropped), as a NIC would.
//   - Generation: with Config.Generator set, Recv itself synthesises psp
//     request packets (wire.Header) from a list of template headers, either
//     as fast as it is called or at a fixed rate on the dataplane's clock.
//     This measures a dispatcher without an injector goroutine competing for
//     a core.
//
// Replies (buffers passed to a TxQueue's Send) are counted per worker and
// then, in this order of preference: given to Config.OnReply in the worker's
// goroutine; discarded (Config.DiscardReplies or generator mode); or copied
// into a Reply on the Replies channel, counting those that find it full.
//
// # Concurrency and closing
//
// Recv is for the net worker goroutine only; each TxQueue for its own worker
// goroutine; Release, the injectors, Stats and the counters are safe from any
// goroutine. Close makes pending and later Recv calls return nic.ErrClosed,
// drops (and counts) packets still queued, and makes later injections fail;
// TxQueues keep working after Close (there is nothing to tear down), so a
// draining dispatcher can still answer. The Replies channel is never closed.
package memnic
