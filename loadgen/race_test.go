//go:build race

package loadgen

// raceEnabled: the race detector makes sync.Pool drop items, so pooled
// buffers in x/net allocate; allocation checks are skipped under it.
const raceEnabled = true
