// Redis classifier: the type is the command, case-insensitively, with
// the commands whose cost grows with an argument typed apart by it in four
// sizes (up to 100, 1,000, 10,000, more): SCAN by its COUNT (10 by
// default), MGET by its number of keys, LRANGE, ZRANGE and ZREVRANGE by
// their span (stop - start + 1 when both indexes have one sign; a span
// that depends on the length, such as 0 -1, and ZRANGE BYSCORE or BYLEX,
// are the largest size). KEYS has a type of its own. Requests are RESP
// multibulk requests ("*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n") or inline
// commands ("GET key\r\n", words separated by spaces). An argument is read
// only when it lies whole within the captured prefix: a request cut before
// the arguments that size it is given its command's largest size. psp's
// native classifier (app/redis.Classify) types requests the same way.
//
// Build (`make classifiers` from the repository root, or from this directory):
// clang --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I ../../../sdk/c -o resp.wasm resp.c
#include "psp.h"

// COMMANDS are the commands with a type, sorted: type 1 + index. They and
// NAMES are app/redis's types, kept by TestRESPTablesFollowNative.
// BEGIN GENERATED: commands
static const char *const COMMANDS[] = {
	"APPEND", "AUTH", "BITCOUNT", "BITPOS", "BLMOVE", "BLMPOP", "BLPOP", "BRPOP", "BRPOPLPUSH",
	"BZMPOP", "BZPOPMAX", "BZPOPMIN", "CLIENT", "COMMAND", "CONFIG", "COPY", "DBSIZE", "DECR",
	"DECRBY", "DEL", "DISCARD", "ECHO", "EXEC", "EXISTS", "EXPIRE", "EXPIREAT", "EXPIRETIME",
	"FLUSHALL", "FLUSHDB", "FUNCTION", "GET", "GETBIT", "GETDEL", "GETEX", "GETRANGE", "GETSET",
	"HDEL", "HELLO", "HEXISTS", "HGET", "HGETALL", "HINCRBY", "HINCRBYFLOAT", "HKEYS", "HLEN",
	"HMGET", "HMSET", "HRANDFIELD", "HSCAN", "HSET", "HSETNX", "HSTRLEN", "HVALS", "INCR",
	"INCRBY", "INCRBYFLOAT", "INFO", "KEYS", "LCS", "LINDEX", "LINSERT", "LLEN", "LMOVE",
	"LMPOP", "LPOP", "LPOS", "LPUSH", "LPUSHX", "LRANGE", "LREM", "LSET", "LTRIM", "MEMORY",
	"MGET", "MSET", "MSETNX", "MULTI", "OBJECT", "PERSIST", "PEXPIRE", "PEXPIREAT",
	"PEXPIRETIME", "PING", "PSETEX", "PSUBSCRIBE", "PTTL", "PUBLISH", "PUBSUB", "PUNSUBSCRIBE",
	"QUIT", "RANDOMKEY", "RENAME", "RENAMENX", "RESET", "RPOP", "RPOPLPUSH", "RPUSH", "RPUSHX",
	"SADD", "SCAN", "SCARD", "SDIFF", "SDIFFSTORE", "SELECT", "SET", "SETBIT", "SETEX", "SETNX",
	"SETRANGE", "SINTER", "SINTERCARD", "SINTERSTORE", "SISMEMBER", "SMEMBERS", "SMISMEMBER",
	"SMOVE", "SPOP", "SRANDMEMBER", "SREM", "SSCAN", "STRLEN", "SUBSCRIBE", "SUBSTR", "SUNION",
	"SUNIONSTORE", "TIME", "TOUCH", "TTL", "TYPE", "UNLINK", "UNSUBSCRIBE", "UNWATCH", "WATCH",
	"XADD", "XDEL", "XLEN", "XRANGE", "XREAD", "XREVRANGE", "XSETID", "XTRIM", "ZADD", "ZCARD",
	"ZCOUNT", "ZDIFF", "ZDIFFSTORE", "ZINCRBY", "ZINTER", "ZINTERCARD", "ZINTERSTORE",
	"ZLEXCOUNT", "ZMPOP", "ZMSCORE", "ZPOPMAX", "ZPOPMIN", "ZRANDMEMBER", "ZRANGE",
	"ZRANGEBYLEX", "ZRANGEBYSCORE", "ZRANGESTORE", "ZRANK", "ZREM", "ZREMRANGEBYLEX",
	"ZREMRANGEBYRANK", "ZREMRANGEBYSCORE", "ZREVRANGE", "ZREVRANGEBYLEX", "ZREVRANGEBYSCORE",
	"ZREVRANK", "ZSCAN", "ZSCORE", "ZUNION", "ZUNIONSTORE",
};
// END GENERATED: commands

#define NUM_COMMANDS (sizeof(COMMANDS) / sizeof(COMMANDS[0]))

// The sized commands, in the order of their larger sizes' types (which
// follow the commands'), each with 3 larger sizes: _1K, _10K, _BIG.
enum { S_MGET, S_SCAN, S_LRANGE, S_ZRANGE, S_ZREVRANGE, NUM_SIZED };
enum { SIZE_BASE, SIZE_1K, SIZE_10K, SIZE_BIG };

#define NUM_TYPES (1 + NUM_COMMANDS + NUM_SIZED * 3)

// BEGIN GENERATED: names
#define NAMES \
	"UNKNOWN\nAPPEND\nAUTH\nBITCOUNT\nBITPOS\nBLMOVE\nBLMPOP\nBLPOP\nBRPOP\nBRPOPLPUSH\n" \
	"BZMPOP\nBZPOPMAX\nBZPOPMIN\nCLIENT\nCOMMAND\nCONFIG\nCOPY\nDBSIZE\nDECR\nDECRBY\nDEL\n" \
	"DISCARD\nECHO\nEXEC\nEXISTS\nEXPIRE\nEXPIREAT\nEXPIRETIME\nFLUSHALL\nFLUSHDB\n" \
	"FUNCTION\nGET\nGETBIT\nGETDEL\nGETEX\nGETRANGE\nGETSET\nHDEL\nHELLO\nHEXISTS\nHGET\n" \
	"HGETALL\nHINCRBY\nHINCRBYFLOAT\nHKEYS\nHLEN\nHMGET\nHMSET\nHRANDFIELD\nHSCAN\nHSET\n" \
	"HSETNX\nHSTRLEN\nHVALS\nINCR\nINCRBY\nINCRBYFLOAT\nINFO\nKEYS\nLCS\nLINDEX\nLINSERT\n" \
	"LLEN\nLMOVE\nLMPOP\nLPOP\nLPOS\nLPUSH\nLPUSHX\nLRANGE\nLREM\nLSET\nLTRIM\nMEMORY\n" \
	"MGET\nMSET\nMSETNX\nMULTI\nOBJECT\nPERSIST\nPEXPIRE\nPEXPIREAT\nPEXPIRETIME\nPING\n" \
	"PSETEX\nPSUBSCRIBE\nPTTL\nPUBLISH\nPUBSUB\nPUNSUBSCRIBE\nQUIT\nRANDOMKEY\nRENAME\n" \
	"RENAMENX\nRESET\nRPOP\nRPOPLPUSH\nRPUSH\nRPUSHX\nSADD\nSCAN\nSCARD\nSDIFF\nSDIFFSTORE\n" \
	"SELECT\nSET\nSETBIT\nSETEX\nSETNX\nSETRANGE\nSINTER\nSINTERCARD\nSINTERSTORE\n" \
	"SISMEMBER\nSMEMBERS\nSMISMEMBER\nSMOVE\nSPOP\nSRANDMEMBER\nSREM\nSSCAN\nSTRLEN\n" \
	"SUBSCRIBE\nSUBSTR\nSUNION\nSUNIONSTORE\nTIME\nTOUCH\nTTL\nTYPE\nUNLINK\nUNSUBSCRIBE\n" \
	"UNWATCH\nWATCH\nXADD\nXDEL\nXLEN\nXRANGE\nXREAD\nXREVRANGE\nXSETID\nXTRIM\nZADD\n" \
	"ZCARD\nZCOUNT\nZDIFF\nZDIFFSTORE\nZINCRBY\nZINTER\nZINTERCARD\nZINTERSTORE\nZLEXCOUNT\n" \
	"ZMPOP\nZMSCORE\nZPOPMAX\nZPOPMIN\nZRANDMEMBER\nZRANGE\nZRANGEBYLEX\nZRANGEBYSCORE\n" \
	"ZRANGESTORE\nZRANK\nZREM\nZREMRANGEBYLEX\nZREMRANGEBYRANK\nZREMRANGEBYSCORE\n" \
	"ZREVRANGE\nZREVRANGEBYLEX\nZREVRANGEBYSCORE\nZREVRANK\nZSCAN\nZSCORE\nZUNION\n" \
	"ZUNIONSTORE\nMGET_1K\nMGET_10K\nMGET_BIG\nSCAN_1K\nSCAN_10K\nSCAN_BIG\nLRANGE_1K\n" \
	"LRANGE_10K\nLRANGE_BIG\nZRANGE_1K\nZRANGE_10K\nZRANGE_BIG\nZREVRANGE_1K\n" \
	"ZREVRANGE_10K\nZREVRANGE_BIG"
// END GENERATED: names

#define PREFIX PSP_PREFIX
#define MAX_NAME 16

// args reads a request's arguments in order.
typedef struct {
	const uint8_t *p;
	uint32_t n;       // captured bytes (the line, for an inline command)
	int truncated;    // the request is longer than p[0:n]
	int is_inline;
	int32_t argc;     // arguments, -1 when unknown
	uint32_t pos;     // where the next argument starts
	int32_t next;     // its index
	int bad;          // an argument could not be read
	const uint8_t *last;
	uint32_t last_len;
} args;

static int32_t count_tokens(const uint8_t *p, uint32_t n) {
	int32_t c = 0;
	uint32_t i = 0;
	while (i < n) {
		while (i < n && p[i] == ' ')
			i++;
		if (i == n)
			break;
		c++;
		while (i < n && p[i] != ' ')
			i++;
	}
	return c;
}

// length_line reads 1 to 9 digits at p[*i] up to "\r\n"; it returns -1
// when malformed, and leaves *i after the line.
static int32_t length_line(const uint8_t *p, uint32_t n, uint32_t *i) {
	uint32_t j = *i;
	int32_t v = 0;
	while (j < n && (uint8_t)(p[j] - '0') < 10 && j - *i < 9) {
		v = v * 10 + (p[j] - '0');
		j++;
	}
	if (j == *i || j + 1 >= n || p[j] != '\r' || p[j + 1] != '\n')
		return -1;
	*i = j + 2;
	return v;
}

static int args_init(args *a, const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	__builtin_memset(a, 0, sizeof *a);
	a->p = p;
	a->n = caplen;
	a->truncated = wirelen > caplen;
	if (caplen == 0)
		return 0;
	if (p[0] != '*') {
		a->is_inline = 1;
		a->argc = -1;
		for (uint32_t i = 0; i < caplen; i++) {
			if (p[i] == '\r' || p[i] == '\n') {
				a->n = i;
				a->truncated = 0;
				a->argc = count_tokens(p, i);
				return 1;
			}
		}
		if (!a->truncated)
			a->argc = count_tokens(p, caplen);
		return 1;
	}
	uint32_t i = 1;
	int32_t count = length_line(p, caplen, &i);
	if (count < 1)
		return 0;
	a->argc = count;
	a->pos = i;
	return 1;
}

// arg reads argument i (at or after the last one read); it returns 0 when
// the argument does not exist or cannot be read within the prefix.
static int arg(args *a, int32_t i) {
	while (a->next <= i && !a->bad) {
		if (a->argc >= 0 && a->next >= a->argc)
			return 0;
		if (a->is_inline) {
			while (a->pos < a->n && a->p[a->pos] == ' ')
				a->pos++;
			uint32_t start = a->pos;
			while (a->pos < a->n && a->p[a->pos] != ' ')
				a->pos++;
			if (a->pos == start || (a->pos == a->n && a->truncated)) {
				a->bad = 1;
				break;
			}
			a->last = a->p + start;
			a->last_len = a->pos - start;
		} else {
			if (a->pos >= a->n || a->p[a->pos] != '$') {
				a->bad = 1;
				break;
			}
			uint32_t j = a->pos + 1;
			int32_t len = length_line(a->p, a->n, &j);
			if (len < 0 || (uint64_t)j + (uint64_t)len + 2 > a->n ||
			    a->p[j + len] != '\r' || a->p[j + len + 1] != '\n') {
				a->bad = 1;
				break;
			}
			a->last = a->p + j;
			a->last_len = (uint32_t)len;
			a->pos = j + (uint32_t)len + 2;
		}
		a->next++;
	}
	return !a->bad && a->next == i + 1;
}

// cut: argument i exists but could not be read.
static int cut(const args *a, int32_t i) {
	if (a->argc >= 0 && i >= a->argc)
		return 0;
	return a->bad;
}

static int fold_equal(const uint8_t *p, uint32_t n, const char *s) {
	uint32_t i = 0;
	for (; i < n && s[i]; i++) {
		uint8_t c = p[i];
		if (c >= 'a' && c <= 'z')
			c -= 'a' - 'A';
		if (c != (uint8_t)s[i])
			return 0;
	}
	return i == n && s[i] == 0;
}

// parse_int parses an optional '-' and 1 to 18 digits.
static int parse_int(const uint8_t *p, uint32_t n, int64_t *v) {
	int neg = n > 0 && p[0] == '-';
	if (neg) {
		p++;
		n--;
	}
	if (n == 0 || n > 18)
		return 0;
	int64_t x = 0;
	for (uint32_t i = 0; i < n; i++) {
		if ((uint8_t)(p[i] - '0') >= 10)
			return 0;
		x = x * 10 + (p[i] - '0');
	}
	*v = neg ? -x : x;
	return 1;
}

static int bucket(int64_t n) {
	if (n <= 100)
		return SIZE_BASE;
	if (n <= 1000)
		return SIZE_1K;
	if (n <= 10000)
		return SIZE_10K;
	return SIZE_BIG;
}

// scan_size reads SCAN's options pairwise, as redis-server does.
static int scan_size(args *a) {
	int64_t count = 10;
	for (int32_t i = 2;; i += 2) {
		if (!arg(a, i))
			return cut(a, i) ? SIZE_BIG : bucket(count);
		const uint8_t *opt = a->last;
		uint32_t opt_len = a->last_len;
		if (!arg(a, i + 1))
			return cut(a, i + 1) ? SIZE_BIG : SIZE_BASE;
		if (fold_equal(opt, opt_len, "COUNT")) {
			int64_t v;
			if (!parse_int(a->last, a->last_len, &v) || v < 1)
				return SIZE_BASE;
			count = v;
		} else if (!fold_equal(opt, opt_len, "MATCH") && !fold_equal(opt, opt_len, "TYPE")) {
			return SIZE_BASE;
		}
	}
}

// range_size sizes LRANGE, ZRANGE and ZREVRANGE by their span.
static int range_size(args *a, int zset) {
	int ok_start = arg(a, 2);
	const uint8_t *start_p = a->last;
	uint32_t start_n = a->last_len;
	int ok_stop = ok_start && arg(a, 3);
	if (!ok_start || !ok_stop)
		return (cut(a, 2) || cut(a, 3)) ? SIZE_BIG : SIZE_BASE;
	const uint8_t *stop_p = a->last;
	uint32_t stop_n = a->last_len;
	if (zset) {
		for (int32_t i = 4;; i++) {
			if (!arg(a, i)) {
				if (cut(a, i))
					return SIZE_BIG;
				break;
			}
			if (fold_equal(a->last, a->last_len, "BYSCORE") || fold_equal(a->last, a->last_len, "BYLEX"))
				return SIZE_BIG;
		}
	}
	int64_t start, stop;
	if (!parse_int(start_p, start_n, &start) || !parse_int(stop_p, stop_n, &stop))
		return SIZE_BASE;
	if ((start < 0) != (stop < 0))
		return SIZE_BIG;
	return bucket(stop - start + 1);
}

// find returns the index of the upper-case name in COMMANDS, or -1.
static int32_t find(const uint8_t *name, uint32_t n) {
	int32_t lo = 0, hi = (int32_t)NUM_COMMANDS - 1;
	while (lo <= hi) {
		int32_t mid = (lo + hi) / 2;
		const char *s = COMMANDS[mid];
		int cmp = 0;
		uint32_t i = 0;
		for (; i < n && s[i]; i++) {
			if (name[i] != (uint8_t)s[i]) {
				cmp = name[i] < (uint8_t)s[i] ? -1 : 1;
				break;
			}
		}
		if (cmp == 0) {
			if (i == n && s[i] == 0)
				return mid;
			cmp = i == n ? -1 : 1; // name is a prefix of s, or s of name
		}
		if (cmp < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	return -1;
}

static uint32_t sized(int which, int size) {
	static const char *const base[NUM_SIZED] = {"MGET", "SCAN", "LRANGE", "ZRANGE", "ZREVRANGE"};
	if (size == SIZE_BASE) {
		uint32_t n = 0;
		while (base[which][n])
			n++;
		return 1 + (uint32_t)find((const uint8_t *)base[which], n);
	}
	return 1 + NUM_COMMANDS + (uint32_t)which * 3 + (uint32_t)size - 1;
}

static uint32_t classify(const uint8_t *p, uint32_t caplen, uint32_t wirelen) {
	args a;
	if (!args_init(&a, p, caplen, wirelen) || !arg(&a, 0))
		return 0;
	if (a.last_len == 0 || a.last_len > MAX_NAME)
		return 0;
	uint8_t name[MAX_NAME];
	uint32_t n = a.last_len;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t c = a.last[i];
		name[i] = (c >= 'a' && c <= 'z') ? (uint8_t)(c - ('a' - 'A')) : c;
	}
	int32_t id = find(name, n);
	if (id < 0)
		return 0;
	if (fold_equal(name, n, "MGET"))
		return sized(S_MGET, a.argc < 0 ? SIZE_BIG : bucket(a.argc - 1));
	if (fold_equal(name, n, "SCAN"))
		return sized(S_SCAN, scan_size(&a));
	if (fold_equal(name, n, "LRANGE"))
		return sized(S_LRANGE, range_size(&a, 0));
	if (fold_equal(name, n, "ZRANGE"))
		return sized(S_ZRANGE, range_size(&a, 1));
	if (fold_equal(name, n, "ZREVRANGE"))
		return sized(S_ZREVRANGE, range_size(&a, 1));
	return 1 + (uint32_t)id;
}

PSP_CLASSIFIER(classify, NUM_TYPES, NAMES)
