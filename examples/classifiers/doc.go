// Package classifiers holds example request classifiers, one folder per
// guest language, each source next to its committed .wasm module (the build
// command is at the top of each source; `make classifiers` rebuilds them
// all):
//
//   - c/, rust/, assemblyscript/, go/, wat/: the psp request header
//     classifier (the type is the u32 at offset 4 of the 16-byte header of
//     package wire), the same in all five languages.
//   - c/memcached.c: memcached's text protocol by cost: single-key GET,
//     MULTIGET, WRITE and OTHER, as psp's memcached application
//     (app/memcached) types them natively; a fuzz test checks that both
//     agree.
//   - c/resp.c, rust/resp.rs: Redis requests (RESP and inline), one type
//     per command, with SCAN, MGET, LRANGE, ZRANGE and ZREVRANGE typed
//     apart by size, as psp's Redis application (app/redis) types them
//     natively; a fuzz test checks that all three agree.
//   - c/kv.c: the kv application's GET and SCAN requests (package app/kv),
//     malformed ones UNKNOWN.
//   - c/random.c: SHORT or LONG at random, for the wrong-classifier
//     experiment.
//   - hostile/: modules the host must refuse or contain (infinite loop,
//     runaway recursion, traps, memory bomb, out-of-range types, bad batch
//     count, imports, bad signatures, bad ABI version, oversized memory).
//
// Its only Go API is PSPHeader, the C psp-header module embedded for tools
// that must run outside the repository (psp demo). Its tests load every
// module with package wasmclass and check it against tables of requests.
package classifiers
