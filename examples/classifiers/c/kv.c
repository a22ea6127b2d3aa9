// The kv application's request classifier (see app/kv): a psp header whose
// type is GET (10) or SCAN (11), followed by a key of 1 to 256 bytes; a GET
// carries a zero count (offset 8), a SCAN a count of at most 2^20. Anything
// else is UNKNOWN, so malformed requests never reach the GET and SCAN
// queues. The types are the psp header's, so this module can replace
// pspheader.wasm.
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o kv.wasm kv.c
#include "psp.h"

#define HEADER 16
#define GET 10
#define SCAN 11
#define MAX_KEY 256
#define MAX_SCAN_COUNT (1u << 20)

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	// The key runs to the end of the payload: its length comes from the
	// wire length, since the captured prefix may cut it.
	if (caplen < HEADER || wirelen <= HEADER || wirelen - HEADER > MAX_KEY)
		return 0;
	uint32_t type = psp_load_u32le(p + 4), count = psp_load_u32le(p + 8);
	if (type == GET)
		return count == 0 ? GET : 0;
	if (type == SCAN)
		return count <= MAX_SCAN_COUNT ? SCAN : 0;
	return 0;
}

PSP_CLASSIFIER(classify, 12,
	"UNKNOWN\nSHORT\nLONG\n\n\nNewOrder\nPayment\nDelivery\nOrderStatus\nStockLevel\nGET\nSCAN")
