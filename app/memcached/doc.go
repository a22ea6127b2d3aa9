// Package memcached is a memcached-compatible application for psp: it
// serves memcached's text protocol over UDP, behind the dispatcher and
// DARC, from a Pebble store (in memory by default, in a directory when
// given, where what was stored is there after a restart).
//
// # Protocol
//
// Requests are memcached UDP datagrams: the 8-byte frame header (request
// id, sequence number, datagram count = 1, reserved; see FrameHeader)
// followed by one or more command lines. The commands are memcached
// 1.6's: get, gets, bget, gat and gats of one or many keys; set, add,
// replace, append, prepend and cas (with noreply); delete; incr and decr;
// touch; flush_all (immediate or delayed); version; verbosity; stats (and
// stats reset, settings, detail); mn; quit. Replies are memcached's,
// byte for byte, and framed as memcached frames them: one message per
// response object (a get of several keys answers one per key, END on the
// last), each split into datagrams of at most 1400 bytes numbered from 0
// with their total, a header-only datagram with a total of 0 where
// memcached sends one. Errors are memcached's: ERROR for an unknown
// command or a wrong number of words, CLIENT_ERROR bad command line format
// for a key longer than 250 bytes or bad numbers, CLIENT_ERROR bad data
// chunk for a value not ending in CRLF, SERVER_ERROR object too large for
// cache for an item over the size limit (Config.MaxItemSize, sized as
// memcached sizes it; the set's data is skipped and the key deleted, as
// memcached does). A storage command stores only a complete, well
// terminated value: nothing is ever stored half-way. Conformance tests
// (server's over UDP through the dispatcher, this package's over TCP,
// tests/ through psp serve) send the same sequences (package memcachedtest)
// to Debian's memcached and to psp and compare every datagram or byte.
//
// # Differences from memcached
//
//   - Every datagram stands alone. memcached keeps per-socket state
//     between datagrams (a value cut at the end of a datagram is completed
//     by the next datagram, header and all; after a quit, every later
//     datagram stops at its first get); psp answers nothing to a command
//     whose value is cut short and forgets it.
//   - Its items live in Pebble (in memory, or on disk with Config.Dir)
//     and an index in memory (itemIndex) keeps them in least recently
//     used order, one list per memcached slab class, without memcached's
//     HOT, WARM and COLD segments. Within Config.StoreMemory they take
//     at most half of it: the other half holds what Pebble keeps until
//     it compacts. Past that, the least recently used item of all
//     classes is evicted (memcached evicts within the class of the new
//     item), or, with Config.DisableEvictions (-M), the store is refused
//     "SERVER_ERROR out of memory storing object". An expired or flushed
//     item is removed when a command reads it (get_expired, get_flushed)
//     or reclaimed when an item of its class is stored (reclaimed,
//     expired_unfetched), as by memcached without its LRU maintainer and
//     crawler, which also reclaim in the background.
//   - A delayed flush_all hides the items stored (not, as in memcached,
//     last accessed) before its time. What a flush_all hid stays hidden:
//     memcached shows again the items it flushed but no command has read
//     since, once a later flush_all is delayed (until that one is due) or
//     dated before memcached started (which flushes nothing).
//   - The meta commands other than mn (mg, ms, md, ma, me) and the
//     administration commands of memcached's slab allocator, LRU, crawler
//     and log watchers (slabs, lru, lru_crawler, watch, cache_memlimit)
//     answer ERROR; stats reports psp's own counters.
//   - Datagrams longer than the dataplane's buffers are dropped before
//     they reach the application (memcached takes up to 64 KiB, and so does
//     psp serve --app memcached, whose buffers default to 65535 bytes).
//   - TCP connections are not scheduled by DARC (see TCP).
//   - A UDP request may cause at most Config.UDPReplyRatio times its own
//     bytes to be sent (100 by default), or Config.UDPReplyFloor (16 KiB)
//     for a smaller request; memcached sends whatever the commands ask
//     for, which makes it a reflection amplifier (a get of one large value
//     repeated in one datagram sends it that many times to the request's
//     source address).
//     A reply that would go past the bound is cut after its last whole
//     response object (no message is sent in part) and ends with a
//     datagram of its own, "SERVER_ERROR reply too large for UDP"; the
//     rest of the request is not run. Cut replies are counted
//     (Counters, stats udp_replies_cut).
//
// # TCP
//
// Over TCP (the TCP dataplane, nic/tcp), Protocol's framer cuts each
// connection's stream into commands as memcached reads it (a line, and a
// storage command's data block), each one request the dispatcher
// schedules like a datagram; gets and version are read-only, so a
// connection's pipelined gets may run at once while a write waits for what
// came before it. What memcached does with a connection's output between
// commands is said with the reply flags of package nic: it holds the
// responses of most commands and transmits them at a get, mn or quit,
// every 20 commands of a read, and when it waits for input (ReplyHold,
// Frame.Flush); a get of a key too long discards what it holds
// (ReplyDiscardHeld); quit and a command memcached closes on end the
// connection (ReplyClose). A value over the item size limit is answered
// "SERVER_ERROR object too large for cache" and its data skipped; values
// being read share Config.TCPMemory, past which a storage command is
// answered memcached's out-of-memory line and its data skipped; a get line
// longer than Config.MaxLine is answered "CLIENT_ERROR line too long" and
// the connection closed, as is a line of more than 2048 bytes without an
// end that is not a get. The connection limit, idle and partial timeouts
// are the dataplane's.
//
// # Overload
//
// A request the server sheds without serving it (its type over its
// budget, past its queue deadline, still queued at shutdown) is answered
// by the dispatcher (Server implements app.OverloadReplier) with
// one datagram: the request's own frame header (request id echoed,
// sequence 0, total 1) and one line (ShedLine). A request holding a
// storage command gets memcached's line for a store it cannot carry out,
// OverloadedLine:
//
//	SERVER_ERROR out of memory storing object\r\n
//
// the one SERVER_ERROR line libmemcached tells apart as a failure of the
// request alone (MEMCACHED_SERVER_MEMORY_ALLOCATION_FAILURE, not fatal:
// the connection is kept). Any other request (a get, a multi-get, incr,
// delete, ...) gets BusyLine, which says what happened:
//
//	SERVER_ERROR busy, request shed: try again\r\n
//
// (libmemcached takes it for a MEMCACHED_SERVER_ERROR, which it treats as
// fatal: it resets the connection); pymemcache and Dalli raise their
// server error for either, which a caller may retry. Nothing of a shed
// request is run: a shed write stores nothing. A shed request gets no
// reply when serving it would have sent none: a datagram that is not a
// valid single-datagram frame, a request whose commands all ask for no
// reply (noreply), a quit, a value cut short. The decision reads at most
// about 2 KiB of command lines (values are skipped, not read) and allocates
// nothing (BenchmarkReplyOverloaded). psp client --format memcached counts
// both lines (and memcached's other out of memory lines) as overloaded.
//
// # Types
//
// Classifier (and the example Wasm classifier
// examples/classifiers/c/memcached.c, which types requests the same way)
// separates single-key reads (GET) from multi-key reads (MULTIGET), writes
// (WRITE) and the rest (OTHER), so that DARC can reserve workers for
// single-key gets and keep them from waiting behind large multi-gets.
//
// # Durability and storage faults
//
// Without Config.Dir nothing survives the process. With it, a write
// answered as done survives a graceful stop (Close syncs the log). A
// kill -9 or a power loss loses the writes answered since the log's last
// sync: without Config.Sync the log is synced every logSyncInterval while
// writes come, so only those of about the last interval are lost; with
// Config.Sync each write is answered after a sync of the log that follows
// it (one sync for the writes of all workers waiting at once), so none
// is, given a disk that keeps what it synced. A write answered
// SERVER_ERROR after waiting past Config.WriteTimeout may still be
// applied, and be there after a restart.
//
// A full disk, a failed write of the store's files or a stalled write
// ends in an answer: "SERVER_ERROR out of memory storing object" within
// Config.WriteTimeout, counted in stats; reads go on, and the store takes
// writes again by itself once the fault ends (see writeHealth). A failed
// write of the log other than a full disk (EIO) stops writes until a
// restart: what the failed write held may be lost.
//
// # Emulated costs
//
// With Config.Emulate, each request also sleeps a dilated cost
// proportional to its commands and keys: an experiment with many workers
// on a machine with few cores then sees service times in proportion to
// the work, as the emulate application does for synthetic requests.
//
// # Concurrency
//
// A Server is used by all dispatcher workers at once, each with its own
// worker index (one session each: buffers, a Pebble batch, counters).
// Reads take no lock; every write to a key holds that key's stripe lock
// for its read-modify-write, so concurrent incr, append or cas on one key
// lose no update. Open the Server before the dispatcher runs and Close it
// after the dispatcher has stopped.
//
// BenchmarkGet, BenchmarkMultiGet100 and BenchmarkSet measure a request in
// the application, datagrams framed (BENCHMARKS.md); TestRequestsAllocateNothing
// asserts none allocates. Package server's BenchmarkMemcachedUnderMemcaslap
// runs memcaslap against psp and Debian's memcached in one run.
package memcached
