// memcached text protocol classifier, by cost: a single-key read (GET), a
// read of several keys (MULTIGET: get, gets, bget, gat or gats naming more
// than one key, whose work grows with the keys), a write (WRITE: set, add,
// replace, append, prepend, cas, delete, incr, decr, touch, and gat/gats of
// one key) and the rest (OTHER: version, stats, flush_all, verbosity, quit,
// shutdown and the meta commands). With these types DARC reserves workers
// for single-key gets, which then never wait behind large multi-gets. The
// type is that of the request's first command; commands are case-sensitive,
// lower case, and words are separated by spaces, as memcached parses them.
// Requests may carry memcached's 8-byte UDP frame header (request id,
// sequence number, datagram count = 1, reserved). psp's native classifier
// (app/memcached.Classify) types requests the same way.
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o memcached.wasm memcached.c
#include "psp.h"

enum {
	UNKNOWN,
	GET,
	MULTIGET,
	WRITE,
	OTHER,
	NUM_TYPES
};

#define NAMES "UNKNOWN\nGET\nMULTIGET\nWRITE\nOTHER"

static inline int is_end(uint8_t c) { return c == ' ' || c == '\r' || c == '\n'; }

// word packs the bytes of a command word of n <= 8 bytes into a u64, first
// byte lowest, like a little-endian load.
#define W2(a, b) ((uint64_t)(a) | (uint64_t)(b) << 8)
#define W3(a, b, c) (W2(a, b) | (uint64_t)(c) << 16)
#define W4(a, b, c, d) (W3(a, b, c) | (uint64_t)(d) << 24)
#define W5(a, b, c, d, e) (W4(a, b, c, d) | (uint64_t)(e) << 32)
#define W6(a, b, c, d, e, f) (W5(a, b, c, d, e) | (uint64_t)(f) << 40)
#define W7(a, b, c, d, e, f, g) (W6(a, b, c, d, e, f) | (uint64_t)(g) << 48)
#define W9P(a, b, c, d, e, f, g, h) (W7(a, b, c, d, e, f, g) | (uint64_t)(h) << 56)

// command classifies the text request in p[0:n].
static uint32_t command(const uint8_t *p, uint32_t n) {
	uint32_t i = 0;
	while (i < n && p[i] == ' ')
		i++; // memcached skips leading spaces
	p += i;
	n -= i;
	uint32_t len = 0;
	uint64_t w = 0;
	while (len < n && !is_end(p[len])) {
		if (len == 9)
			return UNKNOWN; // no command is longer than "verbosity"
		if (len < 8)
			w |= (uint64_t)p[len] << (8 * len);
		len++;
	}
	if (len == n)
		return UNKNOWN; // a command word ends with a space or a line end
	int touch = 0;
	switch (len) {
	case 2:
		switch (w) {
		case W2('m', 'g'): case W2('m', 's'): case W2('m', 'd'):
		case W2('m', 'a'): case W2('m', 'n'): case W2('m', 'e'):
			return OTHER;
		}
		return UNKNOWN;
	case 3:
		switch (w) {
		case W3('g', 'e', 't'): break;
		case W3('g', 'a', 't'): touch = 1; break;
		case W3('s', 'e', 't'): case W3('a', 'd', 'd'): case W3('c', 'a', 's'):
			return WRITE;
		default: return UNKNOWN;
		}
		break;
	case 4:
		switch (w) {
		case W4('g', 'e', 't', 's'): case W4('b', 'g', 'e', 't'): break;
		case W4('g', 'a', 't', 's'): touch = 1; break;
		case W4('i', 'n', 'c', 'r'): case W4('d', 'e', 'c', 'r'):
			return WRITE;
		case W4('q', 'u', 'i', 't'):
			return OTHER;
		default: return UNKNOWN;
		}
		break;
	case 5:
		switch (w) {
		case W5('t', 'o', 'u', 'c', 'h'): return WRITE;
		case W5('s', 't', 'a', 't', 's'): return OTHER;
		}
		return UNKNOWN;
	case 6:
		switch (w) {
		case W6('a', 'p', 'p', 'e', 'n', 'd'): case W6('d', 'e', 'l', 'e', 't', 'e'):
			return WRITE;
		}
		return UNKNOWN;
	case 7:
		switch (w) {
		case W7('r', 'e', 'p', 'l', 'a', 'c', 'e'): case W7('p', 'r', 'e', 'p', 'e', 'n', 'd'):
			return WRITE;
		case W7('v', 'e', 'r', 's', 'i', 'o', 'n'):
			return OTHER;
		}
		return UNKNOWN;
	case 8:
		if (w == W9P('s', 'h', 'u', 't', 'd', 'o', 'w', 'n'))
			return OTHER;
		return UNKNOWN;
	case 9:
		// "flush_all" and "verbosity": compare the first 8 bytes and the 9th.
		if (w == W9P('f', 'l', 'u', 's', 'h', '_', 'a', 'l') && p[8] == 'l')
			return OTHER;
		if (w == W9P('v', 'e', 'r', 'b', 'o', 's', 'i', 't') && p[8] == 'y')
			return OTHER;
		return UNKNOWN;
	default:
		return UNKNOWN;
	}

	// A retrieval command: get/gets/bget take keys; gat/gats an exptime,
	// then keys. Count the words up to the line end (or the captured
	// prefix).
	uint32_t words = 0;
	i = len;
	for (;;) {
		while (i < n && p[i] == ' ')
			i++;
		if (i == n || p[i] == '\r' || p[i] == '\n')
			break;
		words++;
		while (i < n && !is_end(p[i]))
			i++;
	}
	uint32_t keys = touch ? (words > 0 ? words - 1 : 0) : words;
	if (keys == 0)
		return UNKNOWN;
	if (keys > 1)
		return MULTIGET;
	return touch ? WRITE : GET;
}

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	(void)wirelen;
	// memcached's UDP frame header: one datagram (bytes 4-5 hold a count
	// of 1, which no text request has there).
	if (caplen > 8 && p[4] == 0 && p[5] == 1)
		return command(p + 8, caplen - 8);
	return command(p, caplen);
}

PSP_CLASSIFIER(classify, NUM_TYPES, NAMES)
