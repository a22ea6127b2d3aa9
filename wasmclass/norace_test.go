//go:build !race

package wasmclass

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = false
