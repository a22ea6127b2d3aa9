package psp

import "strings"

// The ABI's constants.
const (
	ABIVersion = 1   // psp_abi_version
	IOHeader   = 128 // size of the results area at the start of the I/O buffer
	Slot       = 256 // stride of a slot
	Prefix     = 248 // payload bytes a slot can hold
	MaxBatch   = 32  // slots the host fills per call, at most
	MaxTypes   = 65536
)

// Classifier maps a payload to a request type in 0..N-1, where N is the
// number of names given to Register; 0 is UNKNOWN. payload holds the first
// bytes of the request (at most Prefix) and aliases the host's buffer: do
// not keep it. wirelen is the request's real length.
type Classifier func(payload []byte, wirelen uint32) uint32

// registry is what the exports serve. The guest is single-threaded and it
// is set once, from an init function, before the host reads it.
type registry struct {
	classify  Classifier
	numTypes  int32
	typeNames string // one name per line
}

var registered = registry{
	classify:  func([]byte, uint32) uint32 { return 0 },
	numTypes:  1,
	typeNames: "UNKNOWN",
}

// Register installs the classifier and names its types: names[i] names type
// i (names[0] is normally "UNKNOWN"; "" leaves a type unnamed) and
// len(names) is the number of types N. Call it once, from an init function
// of the main package. It panics (failing _initialize, so the host refuses
// the module) on a nil function, a number of names outside 1..MaxTypes or a
// name containing a newline.
func Register(fn Classifier, names ...string) {
	if fn == nil {
		panic("psp.Register: nil classifier")
	}
	if len(names) < 1 || len(names) > MaxTypes {
		panic("psp.Register: need 1 to 65536 type names")
	}
	for _, n := range names {
		if strings.ContainsRune(n, '\n') {
			panic("psp.Register: type name " + n + " contains a newline")
		}
	}
	registered = registry{
		classify:  fn,
		numTypes:  int32(len(names)),
		typeNames: strings.Join(names, "\n"),
	}
}
