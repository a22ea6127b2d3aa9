// Command pspheader is the psp request header classifier: the type is the
// u32 (little-endian) at offset 4 of the 16-byte header (see wire/wire.go).
//
// Build (`make classifiers` from the repository root, or from this directory):
// GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -trimpath -o pspheader.wasm .
package main

import (
	"encoding/binary"

	psp "github.com/persephone-go/psp/sdk/go"
)

const numTypes = 12

func classify(payload []byte, _ uint32) uint32 {
	if len(payload) < 16 {
		return 0
	}
	if t := binary.LittleEndian.Uint32(payload[4:]); t < numTypes {
		return t
	}
	return 0
}

func init() {
	psp.Register(classify,
		"UNKNOWN", "SHORT", "LONG", "", "",
		"NewOrder", "Payment", "Delivery", "OrderStatus", "StockLevel",
		"GET", "SCAN")
}

func main() {}
