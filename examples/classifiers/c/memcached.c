// memcached text protocol classifier: one type per command, by the command
// word at the start of the request (commands are case-sensitive, lower
// case). A get/gets/gat/gats naming several keys is a MULTIGET: it costs
// more than a single-key lookup. Requests may carry memcached's 8-byte UDP
// frame header (request id, sequence number, datagram count, reserved = 0).
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o memcached.wasm memcached.c
#include "psp.h"

enum {
	UNKNOWN,
	GET,
	MULTIGET,
	GETS,
	GAT,
	GATS,
	SET,
	ADD,
	REPLACE,
	APPEND,
	PREPEND,
	CAS,
	DELETE,
	INCR,
	DECR,
	TOUCH,
	STATS,
	FLUSH_ALL,
	VERSION,
	VERBOSITY,
	QUIT,
	META, // mg, ms, md, ma, mn, me
	NUM_TYPES
};

#define NAMES                                                             \
	"UNKNOWN\nGET\nMULTIGET\nGETS\nGAT\nGATS\nSET\nADD\nREPLACE\nAPPEND\n" \
	"PREPEND\nCAS\nDELETE\nINCR\nDECR\nTOUCH\nSTATS\nFLUSH_ALL\nVERSION\n" \
	"VERBOSITY\nQUIT\nMETA"

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
	switch (len) {
	case 2:
		switch (w) {
		case W2('m', 'g'): case W2('m', 's'): case W2('m', 'd'):
		case W2('m', 'a'): case W2('m', 'n'): case W2('m', 'e'):
			return META;
		}
		return UNKNOWN;
	case 3:
		switch (w) {
		case W3('g', 'e', 't'): break;
		case W3('s', 'e', 't'): return SET;
		case W3('a', 'd', 'd'): return ADD;
		case W3('c', 'a', 's'): return CAS;
		case W3('g', 'a', 't'): break;
		default: return UNKNOWN;
		}
		break;
	case 4:
		switch (w) {
		case W4('g', 'e', 't', 's'): break;
		case W4('g', 'a', 't', 's'): break;
		case W4('i', 'n', 'c', 'r'): return INCR;
		case W4('d', 'e', 'c', 'r'): return DECR;
		case W4('q', 'u', 'i', 't'): return QUIT;
		default: return UNKNOWN;
		}
		break;
	case 5:
		switch (w) {
		case W5('t', 'o', 'u', 'c', 'h'): return TOUCH;
		case W5('s', 't', 'a', 't', 's'): return STATS;
		}
		return UNKNOWN;
	case 6:
		switch (w) {
		case W6('a', 'p', 'p', 'e', 'n', 'd'): return APPEND;
		case W6('d', 'e', 'l', 'e', 't', 'e'): return DELETE;
		}
		return UNKNOWN;
	case 7:
		switch (w) {
		case W7('r', 'e', 'p', 'l', 'a', 'c', 'e'): return REPLACE;
		case W7('p', 'r', 'e', 'p', 'e', 'n', 'd'): return PREPEND;
		case W7('v', 'e', 'r', 's', 'i', 'o', 'n'): return VERSION;
		}
		return UNKNOWN;
	case 9:
		// "flush_all" and "verbosity": compare the first 8 bytes and the 9th.
		if (w == W9P('f', 'l', 'u', 's', 'h', '_', 'a', 'l') && p[8] == 'l')
			return FLUSH_ALL;
		if (w == W9P('v', 'e', 'r', 'b', 'o', 's', 'i', 't') && p[8] == 'y')
			return VERBOSITY;
		return UNKNOWN;
	default:
		return UNKNOWN;
	}

	// A retrieval command: get/gets take keys; gat/gats an exptime, then
	// keys. Count the keys up to the line end (or the captured prefix).
	uint32_t i = len, words = 0;
	for (;;) {
		while (i < n && p[i] == ' ')
			i++;
		if (i == n || p[i] == '\r' || p[i] == '\n')
			break;
		words++;
		while (i < n && !is_end(p[i]))
			i++;
	}
	uint32_t keys = words;
	int touch = w == W3('g', 'a', 't') || w == W4('g', 'a', 't', 's');
	if (touch)
		keys = words > 0 ? words - 1 : 0;
	if (keys == 0)
		return UNKNOWN;
	if (keys > 1)
		return MULTIGET;
	switch (w) {
	case W3('g', 'e', 't'): return GET;
	case W4('g', 'e', 't', 's'): return GETS;
	case W3('g', 'a', 't'): return GAT;
	default: return GATS;
	}
}

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	(void)wirelen;
	if (caplen > 0 && p[0] >= 'a' && p[0] <= 'z') {
		uint32_t t = command(p, caplen);
		if (t != UNKNOWN)
			return t;
	}
	// memcached's UDP frame header: the reserved field (bytes 6-7) is zero.
	if (caplen > 8 && p[6] == 0 && p[7] == 0)
		return command(p + 8, caplen - 8);
	return UNKNOWN;
}

PSP_CLASSIFIER(classify, NUM_TYPES, NAMES)
