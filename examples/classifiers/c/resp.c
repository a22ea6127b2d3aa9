// Redis RESP classifier: one type per command, by command name,
// case-insensitive. Requests are RESP arrays of bulk strings
// ("*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n") or inline commands ("get key\r\n").
// Commands not listed here are UNKNOWN.
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o resp.wasm resp.c
#include "psp.h"

enum {
	UNKNOWN,
	GET,
	SET,
	DEL,
	EXISTS,
	EXPIRE,
	TTL,
	INCR,
	DECR,
	INCRBY,
	APPEND,
	STRLEN,
	GETSET,
	SETEX,
	SETNX,
	MGET,
	MSET,
	SCAN,
	KEYS,
	EVAL,
	EVALSHA,
	HGET,
	HSET,
	HDEL,
	HGETALL,
	HMGET,
	HMSET,
	HINCRBY,
	LPUSH,
	RPUSH,
	LPOP,
	RPOP,
	LRANGE,
	LLEN,
	SADD,
	SREM,
	SMEMBERS,
	SISMEMBER,
	ZADD,
	ZREM,
	ZRANGE,
	ZRANGEBYSCORE,
	ZSCORE,
	ZINCRBY,
	PING,
	ECHO,
	INFO,
	SELECT,
	AUTH,
	MULTI,
	EXEC,
	PUBLISH,
	SUBSCRIBE,
	FLUSHALL,
	DBSIZE,
	NUM_TYPES
};

#define NAMES \
	"UNKNOWN\n" \
	"GET\nSET\nDEL\nEXISTS\nEXPIRE\nTTL\nINCR\nDECR\nINCRBY\n" \
	"APPEND\nSTRLEN\nGETSET\nSETEX\nSETNX\nMGET\nMSET\nSCAN\n" \
	"KEYS\nEVAL\nEVALSHA\nHGET\nHSET\nHDEL\nHGETALL\nHMGET\n" \
	"HMSET\nHINCRBY\nLPUSH\nRPUSH\nLPOP\nRPOP\nLRANGE\nLLEN\n" \
	"SADD\nSREM\nSMEMBERS\nSISMEMBER\nZADD\nZREM\nZRANGE\n" \
	"ZRANGEBYSCORE\nZSCORE\nZINCRBY\nPING\nECHO\nINFO\nSELECT\n" \
	"AUTH\nMULTI\nEXEC\nPUBLISH\nSUBSCRIBE\nFLUSHALL\nDBSIZE"

#define MAX_NAME 16 // longer command names are UNKNOWN

// K packs up to 8 bytes into a u64, first byte lowest.
#define K_(a, b, c, d, e, f, g, h, ...)                                   \
	((uint64_t)(a) | (uint64_t)(b) << 8 | (uint64_t)(c) << 16 |           \
	 (uint64_t)(d) << 24 | (uint64_t)(e) << 32 | (uint64_t)(f) << 40 |    \
	 (uint64_t)(g) << 48 | (uint64_t)(h) << 56)
#define K(...) K_(__VA_ARGS__, 0, 0, 0, 0, 0, 0, 0, 0)

// lookup maps an upper-case name of n bytes, packed into lo (bytes 0-7) and
// hi (bytes 8-15), to its type.
static uint32_t lookup(uint32_t n, uint64_t lo, uint64_t hi) {
	switch (n) {
	case 3:
		switch (lo) {
		case K('D', 'E', 'L'): return DEL;
		case K('G', 'E', 'T'): return GET;
		case K('S', 'E', 'T'): return SET;
		case K('T', 'T', 'L'): return TTL;
		}
		return UNKNOWN;
	case 4:
		switch (lo) {
		case K('A', 'U', 'T', 'H'): return AUTH;
		case K('D', 'E', 'C', 'R'): return DECR;
		case K('E', 'C', 'H', 'O'): return ECHO;
		case K('E', 'V', 'A', 'L'): return EVAL;
		case K('E', 'X', 'E', 'C'): return EXEC;
		case K('H', 'D', 'E', 'L'): return HDEL;
		case K('H', 'G', 'E', 'T'): return HGET;
		case K('H', 'S', 'E', 'T'): return HSET;
		case K('I', 'N', 'C', 'R'): return INCR;
		case K('I', 'N', 'F', 'O'): return INFO;
		case K('K', 'E', 'Y', 'S'): return KEYS;
		case K('L', 'L', 'E', 'N'): return LLEN;
		case K('L', 'P', 'O', 'P'): return LPOP;
		case K('M', 'G', 'E', 'T'): return MGET;
		case K('M', 'S', 'E', 'T'): return MSET;
		case K('P', 'I', 'N', 'G'): return PING;
		case K('R', 'P', 'O', 'P'): return RPOP;
		case K('S', 'A', 'D', 'D'): return SADD;
		case K('S', 'C', 'A', 'N'): return SCAN;
		case K('S', 'R', 'E', 'M'): return SREM;
		case K('Z', 'A', 'D', 'D'): return ZADD;
		case K('Z', 'R', 'E', 'M'): return ZREM;
		}
		return UNKNOWN;
	case 5:
		switch (lo) {
		case K('H', 'M', 'G', 'E', 'T'): return HMGET;
		case K('H', 'M', 'S', 'E', 'T'): return HMSET;
		case K('L', 'P', 'U', 'S', 'H'): return LPUSH;
		case K('M', 'U', 'L', 'T', 'I'): return MULTI;
		case K('R', 'P', 'U', 'S', 'H'): return RPUSH;
		case K('S', 'E', 'T', 'E', 'X'): return SETEX;
		case K('S', 'E', 'T', 'N', 'X'): return SETNX;
		}
		return UNKNOWN;
	case 6:
		switch (lo) {
		case K('A', 'P', 'P', 'E', 'N', 'D'): return APPEND;
		case K('D', 'B', 'S', 'I', 'Z', 'E'): return DBSIZE;
		case K('E', 'X', 'I', 'S', 'T', 'S'): return EXISTS;
		case K('E', 'X', 'P', 'I', 'R', 'E'): return EXPIRE;
		case K('G', 'E', 'T', 'S', 'E', 'T'): return GETSET;
		case K('I', 'N', 'C', 'R', 'B', 'Y'): return INCRBY;
		case K('L', 'R', 'A', 'N', 'G', 'E'): return LRANGE;
		case K('S', 'E', 'L', 'E', 'C', 'T'): return SELECT;
		case K('S', 'T', 'R', 'L', 'E', 'N'): return STRLEN;
		case K('Z', 'R', 'A', 'N', 'G', 'E'): return ZRANGE;
		case K('Z', 'S', 'C', 'O', 'R', 'E'): return ZSCORE;
		}
		return UNKNOWN;
	case 7:
		switch (lo) {
		case K('E', 'V', 'A', 'L', 'S', 'H', 'A'): return EVALSHA;
		case K('H', 'G', 'E', 'T', 'A', 'L', 'L'): return HGETALL;
		case K('H', 'I', 'N', 'C', 'R', 'B', 'Y'): return HINCRBY;
		case K('P', 'U', 'B', 'L', 'I', 'S', 'H'): return PUBLISH;
		case K('Z', 'I', 'N', 'C', 'R', 'B', 'Y'): return ZINCRBY;
		}
		return UNKNOWN;
	case 8:
		switch (lo) {
		case K('F', 'L', 'U', 'S', 'H', 'A', 'L', 'L'): return FLUSHALL;
		case K('S', 'M', 'E', 'M', 'B', 'E', 'R', 'S'): return SMEMBERS;
		}
		return UNKNOWN;
	case 9:
		switch (lo) {
		case K('S', 'I', 'S', 'M', 'E', 'M', 'B', 'E'): return hi == K('R') ? SISMEMBER : UNKNOWN;
		case K('S', 'U', 'B', 'S', 'C', 'R', 'I', 'B'): return hi == K('E') ? SUBSCRIBE : UNKNOWN;
		}
		return UNKNOWN;
	case 13:
		switch (lo) {
		case K('Z', 'R', 'A', 'N', 'G', 'E', 'B', 'Y'): return hi == K('S', 'C', 'O', 'R', 'E') ? ZRANGEBYSCORE : UNKNOWN;
		}
		return UNKNOWN;
	}
	return UNKNOWN;
}

// upper folds the ASCII lower-case letters of the 8 bytes in w to upper
// case, all at once (the other bytes are unchanged).
static inline uint64_t upper(uint64_t w) {
	const uint64_t ones = 0x0101010101010101ull, high = ones * 0x80;
	uint64_t low7 = w & ~high;
	uint64_t ge_a = low7 + ones * (0x80 - 'a');     // bit 7 set where byte >= 'a'
	uint64_t gt_z = low7 + ones * (0x80 - 'z' - 1); // bit 7 set where byte > 'z'
	uint64_t lower = ge_a & ~gt_z & ~w & high;       // ASCII a..z only
	return w - (lower >> 2);                         // 0x80 >> 2 = 0x20
}

// mask keeps the first n (< 8) bytes of w.
static inline uint64_t mask(uint64_t w, uint32_t n) {
	return w & ((1ull << (8 * n)) - 1);
}

static inline uint64_t load64(const uint8_t *p) {
	uint64_t v;
	__builtin_memcpy(&v, p, 8);
	return v;
}

// name folds the command name in p[0:n] to upper case and looks it up.
// p[0:16] must be readable: the slot holds PSP_PREFIX bytes, and bytes past
// caplen are unspecified but masked off here.
static uint32_t name(const uint8_t *p, uint32_t n) {
	if (n == 0 || n > MAX_NAME)
		return UNKNOWN;
	uint64_t lo = load64(p), hi = 0;
	if (n < 8) {
		lo = mask(lo, n);
	} else if (n > 8) {
		hi = load64(p + 8);
		if (n < 16)
			hi = mask(hi, n - 8);
		hi = upper(hi);
	}
	return lookup(n, upper(lo), hi);
}

// readable returns whether 16 bytes from offset i of a slot's payload lie
// inside the slot.
static inline int readable(uint32_t i) { return i + MAX_NAME <= PSP_PREFIX; }

// number parses the decimal digits at p[*i:n] up to "\r\n", which it skips.
// It returns -1 on a malformed or missing number.
static int32_t number(const uint8_t *p, uint32_t n, uint32_t *i) {
	uint32_t j = *i;
	int32_t v = 0;
	while (j < n && (uint8_t)(p[j] - '0') < 10) {
		if (v > 100000000)
			return -1;
		v = v * 10 + (p[j] - '0');
		j++;
	}
	if (j == *i || j + 2 > n || p[j] != '\r' || p[j + 1] != '\n')
		return -1;
	*i = j + 2;
	return v;
}

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	(void)wirelen;
	if (caplen == 0)
		return UNKNOWN;
	if (p[0] == '*') {
		// *<count>\r\n$<len>\r\n<name>\r\n...
		uint32_t i = 1;
		if (number(p, caplen, &i) < 1 || i >= caplen || p[i] != '$')
			return UNKNOWN;
		i++;
		int32_t len = number(p, caplen, &i);
		if (len < 1 || len > MAX_NAME || i + (uint32_t)len > caplen || !readable(i))
			return UNKNOWN;
		return name(p + i, (uint32_t)len);
	}
	// Inline command: the name runs to the first space or line end.
	uint32_t len = 0;
	while (len < caplen && len <= MAX_NAME && p[len] != ' ' && p[len] != '\r' && p[len] != '\n')
		len++;
	return name(p, len); // readable(0) holds
}

PSP_CLASSIFIER(classify, NUM_TYPES, NAMES)
