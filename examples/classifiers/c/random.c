// The random classifier of the wrong-classifier experiment: every request
// gets SHORT or LONG with probability 1/2 each, whatever its real type. It
// uses the psp header's type names, so it can replace pspheader.wasm.
//
// "Random" is a hash of the captured payload (up to its first 32 bytes,
// which hold the request id), not a generator with state: the ABI forbids
// state that changes answers between packets, and a hash gives each request
// a fixed, reproducible type that is uniform over requests with distinct ids.
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o random.wasm random.c
#include "psp.h"

#define SHORT 1
#define LONG 2

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	uint32_t n = caplen < 32 ? caplen : 32;
	uint32_t h = 2166136261u ^ wirelen; // FNV-1a
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	h ^= h >> 16; // murmur3's finalizer spreads every input bit to bit 0
	h *= 0x85ebca6bu;
	h ^= h >> 13;
	h *= 0xc2b2ae35u;
	h ^= h >> 16;
	return (h & 1) ? LONG : SHORT;
}

PSP_CLASSIFIER(classify, 12,
	"UNKNOWN\nSHORT\nLONG\n\n\nNewOrder\nPayment\nDelivery\nOrderStatus\nStockLevel\nGET\nSCAN")
