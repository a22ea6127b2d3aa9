package dispatcher

import (
	"github.com/persephone-go/psp/darc"
	"github.com/persephone-go/psp/wire"
)

// HeaderNumTypes is the size of the psp-header type space: the wire type ids
// 0..11 (see package wire), the same space as the example Wasm psp-header
// classifiers.
const HeaderNumTypes = 12

// HeaderTypeNames returns the names of the psp-header types, index = id.
// Ids 3 and 4 are unused by the paper's workloads and unnamed.
func HeaderTypeNames() []string {
	return []string{"UNKNOWN", "SHORT", "LONG", "", "", "NewOrder", "Payment",
		"Delivery", "OrderStatus", "StockLevel", "GET", "SCAN"}
}

// HeaderClassifier is the native psp-header classifier: the type is the
// header's type field (wire.TypeOf). Payloads shorter than the header and
// type ids outside 0..HeaderNumTypes-1 are Unknown. It is stateless and safe
// for concurrent use.
type HeaderClassifier struct{}

// ClassifyBatch implements app.Classifier.
func (HeaderClassifier) ClassifyBatch(payloads [][]byte, out []darc.Type) {
	out = out[:len(payloads)]
	for i, p := range payloads {
		t := wire.TypeOf(p)
		if t >= HeaderNumTypes {
			t = wire.TypeUnknown
		}
		out[i] = darc.Type(t)
	}
}
