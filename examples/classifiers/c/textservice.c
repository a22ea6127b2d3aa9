// Classifier of examples/service, a tiny text service: "echo <text>" is
// ECHO (short), "primes <n>" is PRIMES (long: it counts primes); anything
// else is UNKNOWN. It is the classifier of the example in the README's "Put
// your own service behind psp".
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o textservice.wasm textservice.c
#include "psp.h"

enum { UNKNOWN, ECHO, PRIMES, NUM_TYPES };

// starts reports whether p[0:n] starts with the NUL-terminated word w.
static int starts(const uint8_t *p, uint32_t n, const char *w) {
	uint32_t i = 0;
	for (; w[i]; i++)
		if (i >= n || p[i] != (uint8_t)w[i])
			return 0;
	return 1;
}

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	(void)wirelen;
	if (starts(p, caplen, "echo "))
		return ECHO;
	if (starts(p, caplen, "primes "))
		return PRIMES;
	return UNKNOWN;
}

PSP_CLASSIFIER(classify, NUM_TYPES, "UNKNOWN\nECHO\nPRIMES")
