// Package kv is a key-value store application on Pebble (in memory by
// default, in a directory when given) serving the paper's RocksDB workload:
// GET of one key and SCAN of a range, over 5,000 preloaded keys.
//
// # Request format
//
// A request is a psp header (package wire, 16 bytes, little-endian) followed
// by the key:
//
//	offset 0   u32 request id (echoed)
//	offset 4   u32 type: 10 = GET (wire.TypeGet), 11 = SCAN (wire.TypeScan)
//	offset 8   u32 count: SCAN reads this many keys from the key on
//	           (0 = DefaultScanCount, 5,000: the whole preloaded set); GET: 0
//	offset 12  u32 service time: ignored (0)
//	offset 16  key bytes, to the end of the payload (1..MaxKeyLen bytes)
//
// Preloaded keys are Key(0) .. Key(n-1): "k00000", "k00001", ... (a "k" and
// five decimal digits), each with a value of Config.ValueSize bytes. A
// client reading the paper's workload sends GET Key(rand) and SCAN Key(0).
//
// # Response format
//
// The response starts with the request's header echoed, except offset 8,
// which carries a status (StatusOK 0, StatusNotFound 1, StatusBadRequest 2,
// StatusOverloaded 3). After it:
//
//	GET:  the value (cut to what fits in the buffer)
//	SCAN: u32 keys read, u32 value bytes read, u64 FNV-1a hash of the values
//
// A request the server shed (its type over its budget, past its deadline in
// the queue, still queued at shutdown) is answered with the header alone and
// StatusOverloaded, from the dispatcher (Store implements
// app.OverloadReplier): the client can retry later or elsewhere at
// once rather than wait for a timeout.
//
// # Classification
//
// Because the request starts with a psp header, the native psp-header
// classifier (dispatcher.HeaderClassifier) and the example Wasm psp-header
// classifiers classify it (GET = 10, SCAN = 11). Classifier is a stricter
// native classifier: anything that is not a well-formed GET or SCAN is
// Unknown.
//
// # Concurrency
//
// A Store is safe for concurrent use by all workers; Close it after the
// workers stop.
package kv
