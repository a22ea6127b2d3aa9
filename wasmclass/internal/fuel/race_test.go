//go:build race

package fuel

// raceEnabled is true when the tests run under the race detector.
const raceEnabled = true
