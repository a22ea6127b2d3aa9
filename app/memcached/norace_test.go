//go:build !race

package memcached

const raceEnabled = false
