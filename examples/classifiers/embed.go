package classifiers

import _ "embed"

// PSPHeader is the C psp-header classifier (c/pspheader.wasm), embedded so
// that tools such as psp demo run without a checkout of the repository.
//
//go:embed c/pspheader.wasm
var PSPHeader []byte
