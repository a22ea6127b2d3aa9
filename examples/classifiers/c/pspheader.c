// The psp request header classifier: the type is the u32 (little-endian) at
// offset 4 of the 16-byte header (see wire/wire.go).
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o pspheader.wasm pspheader.c
#include "psp.h"

#define NUM_TYPES 12

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	(void)wirelen;
	if (caplen < 16)
		return 0;
	uint32_t t = psp_load_u32le(p + 4);
	return t < NUM_TYPES ? t : 0;
}

PSP_CLASSIFIER(classify, NUM_TYPES,
	"UNKNOWN\nSHORT\nLONG\n\n\nNewOrder\nPayment\nDelivery\nOrderStatus\nStockLevel\nGET\nSCAN")
