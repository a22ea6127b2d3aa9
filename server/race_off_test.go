//go:build !race

package server

// raceDetector: the tests run under the race detector (several times
// slower): long loops run fewer rounds.
const raceDetector = false
