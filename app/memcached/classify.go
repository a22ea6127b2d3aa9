package memcached

import "github.com/persephone-go/psp/app"

// Request types, the same as the example Wasm classifier
// examples/classifiers/c/memcached.c: what a request costs, so DARC can
// keep single-key reads away from the work of large multi-gets.
const (
	TypeUnknown  app.Type = iota // not a memcached request
	TypeGet                      // get, gets or bget of one key
	TypeMultiGet                 // get, gets, bget, gat or gats of several keys
	TypeWrite                    // set, add, replace, append, prepend, cas, delete, incr, decr, touch, gat and gats of one key
	TypeOther                    // version, stats, flush_all, verbosity, mn, quit, meta commands, ...
	NumTypes
)

// TypeNames returns the type names, index = type.
func TypeNames() []string {
	return []string{"UNKNOWN", "GET", "MULTIGET", "WRITE", "OTHER"}
}

// Classifier is the native memcached classifier: it reads the first command
// of a request, after memcached's 8-byte UDP frame header when the request
// has one (bytes 4-5 hold a datagram count of 1, which no text request has
// there), and types it exactly like the example Wasm classifier
// examples/classifiers/c/memcached.c. It is stateless, safe for concurrent
// use and allocates nothing.
type Classifier struct{}

// ClassifyBatch implements app.Classifier.
func (Classifier) ClassifyBatch(payloads [][]byte, out []app.Type) {
	for i, p := range payloads {
		out[i] = Classify(p)
	}
}

// ClassifyPrefix is how much of a request Classify reads: as much as a Wasm
// classifier sees (the classifier ABI's PREFIX, wasmclass.Prefix), so that
// both type a multi-get whose keys run past it the same way.
const ClassifyPrefix = 248

// Classify types one request from its first ClassifyPrefix bytes.
func Classify(p []byte) app.Type {
	if len(p) > ClassifyPrefix {
		p = p[:ClassifyPrefix]
	}
	if len(p) > UDPHeaderLen && p[4] == 0 && p[5] == 1 {
		return classifyCommand(p[UDPHeaderLen:])
	}
	return classifyCommand(p)
}

// classifyCommand types the command line at the start of p.
func classifyCommand(p []byte) app.Type {
	i := 0
	for i < len(p) && p[i] == ' ' {
		i++
	}
	start := i
	for i < len(p) && !wordEnd(p[i]) {
		i++
	}
	if i == len(p) {
		return TypeUnknown // no line end after the command word
	}
	word := p[start:i]
	switch string(word) {
	case "get", "gets", "bget", "gat", "gats":
	case "set", "add", "replace", "append", "prepend", "cas", "delete", "incr", "decr", "touch":
		return TypeWrite
	case "version", "stats", "flush_all", "verbosity", "quit", "shutdown", "mn", "mg", "ms", "md", "ma", "me":
		return TypeOther
	default:
		return TypeUnknown
	}
	// Count the words after the command up to the line end.
	words := 0
	for {
		for i < len(p) && p[i] == ' ' {
			i++
		}
		if i == len(p) || p[i] == '\r' || p[i] == '\n' {
			break
		}
		words++
		for i < len(p) && !wordEnd(p[i]) {
			i++
		}
	}
	touch := word[1] == 'a' // gat, gats
	keys := words
	if touch {
		keys--
	}
	switch {
	case keys <= 0:
		return TypeUnknown
	case keys > 1:
		return TypeMultiGet
	case touch:
		return TypeWrite
	default:
		return TypeGet
	}
}

func wordEnd(c byte) bool { return c == ' ' || c == '\r' || c == '\n' }
