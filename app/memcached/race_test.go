//go:build race

package memcached

// raceEnabled: the race detector makes sync.Pool drop items, so Pebble's
// pooled iterators allocate; allocation checks are skipped under it.
const raceEnabled = true
