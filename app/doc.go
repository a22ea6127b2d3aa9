// Package app holds the applications psp's workers run, one sub-package each:
//
//   - spin: the paper's synthetic requests; the worker busy-spins for the
//     service time carried in the psp header.
//   - emulate: the same requests with time dilated (e.g. 1µs becomes 1ms) and
//     the worker sleeping instead of spinning, so an experiment with many
//     workers shows realistic queueing on a machine with few cores.
//   - tpcc: synthetic spin (or emulation) with the TPC-C transaction types of
//     the paper, using each type's nominal mean when the header carries none.
//   - kv: a key-value store on Pebble serving GET and SCAN.
//   - memcached: memcached's text protocol over UDP (and TCP beside the
//     dispatcher) on Pebble, framed and answered as memcached does.
//
// Every application implements dispatcher.Handler: it reads the request from
// the buffer and writes its response in place; memcached also implements
// dispatcher.MultiHandler, for replies of several datagrams (through a
// nic.Reply). Applications know only darc, nic and wire: the server builds
// each one as a server.Application, the same type a program uses to serve
// its own.
package app
