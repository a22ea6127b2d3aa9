package memcached

import "math"

// maxTokens is memcached's MAX_TOKENS: a command line is split into at most
// maxTokens-1 tokens at a time, the rest left for another pass (only
// retrieval commands take one).
const maxTokens = 24

// tokens is a tokenised command line: up to maxTokens-1 words and the
// unprocessed rest. It mirrors memcached's token_t array, whose last entry
// (the "terminal token") has length zero and points at the rest, or is NULL
// when the whole line was consumed; n counts the terminal token, as
// memcached's ntokens does.
type tokens struct {
	w    [maxTokens - 1][]byte
	n    int    // words + 1
	rest []byte // nil: the whole line was consumed
}

// word returns token i ("" past the end, like memcached's terminal token).
func (t *tokens) word(i int) []byte {
	if i < t.n-1 {
		return t.w[i]
	}
	return nil
}

// tokenize splits line at spaces (only ' ': memcached's tokenize_command)
// into at most maxTokens-1 words. When it stops early, rest holds the
// unprocessed bytes (possibly only spaces); otherwise rest is nil.
func tokenize(line []byte, t *tokens) {
	n := 0
	s := 0
	t.rest = nil
	i := 0
	for ; i < len(line); i++ {
		if line[i] != ' ' {
			continue
		}
		if s != i {
			t.w[n] = line[s:i]
			n++
			if n == maxTokens-1 {
				i++
				s = i
				if i < len(line) {
					t.rest = line[i:]
				}
				t.n = n + 1
				return
			}
		}
		s = i + 1
	}
	if s < len(line) {
		t.w[n] = line[s:]
		n++
	}
	t.n = n + 1
}

// isSpace is C's isspace in the "C" locale.
func isSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}

// cstring returns b up to its first NUL byte: memcached parses tokens as C
// strings.
func cstring(b []byte) []byte {
	for i, c := range b {
		if c == 0 {
			return b[:i]
		}
	}
	return b
}

// sign skips the leading white space and sign of a number in b, as C's
// strto* functions do: it returns where the digits start and whether the
// sign was a minus.
func sign(b []byte) (i int, neg bool) {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	if i < len(b) && (b[i] == '+' || b[i] == '-') {
		neg = b[i] == '-'
		i++
	}
	return i, neg
}

// strtou parses like C's strtoull/strtoul in base 10 (64-bit): leading
// white space, an optional sign (a minus negates modulo 2^64), digits. It
// returns the value, how many bytes it consumed (0: no digits) and whether
// it overflowed (ERANGE).
func strtou(b []byte) (v uint64, end int, overflow bool) {
	i, neg := sign(b)
	start := i
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			overflow = true
		}
		v = v*10 + d
	}
	if i == start {
		return 0, 0, false
	}
	if overflow {
		return math.MaxUint64, i, true
	}
	if neg {
		v = -v
	}
	return v, i, false
}

// strtol parses like C's strtol (64-bit long) in base 10.
func strtol(b []byte) (v int64, end int, overflow bool) {
	i, neg := sign(b)
	start := i
	var u uint64
	limit := uint64(math.MaxInt64)
	if neg {
		limit++
	}
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		d := uint64(b[i] - '0')
		if u > (limit-d)/10 {
			overflow = true
		}
		u = u*10 + d
	}
	if i == start {
		return 0, 0, false
	}
	if overflow {
		if neg {
			return math.MinInt64, i, true
		}
		return math.MaxInt64, i, true
	}
	if neg {
		return -int64(u), i, false
	}
	return int64(u), i, false
}

// endOK is memcached's test after a conversion: the number must be followed
// by white space or the end of the string, and must not be empty.
func endOK(s []byte, end int) bool {
	return end > 0 && (end == len(s) || isSpace(s[end]))
}

// hasMinus reports whether s[:end] holds a minus sign.
func hasMinus(s []byte, end int) bool {
	for _, c := range s[:end] {
		if c == '-' {
			return true
		}
	}
	return false
}

// safeStrtoull is memcached's safe_strtoull on the C string in b.
func safeStrtoull(b []byte) (uint64, bool) {
	s := cstring(b)
	v, end, overflow := strtou(s)
	if overflow || !endOK(s, end) {
		return 0, false
	}
	if int64(v) < 0 && hasMinus(s, end) {
		return 0, false
	}
	return v, true
}

// safeStrtoul is memcached's safe_strtoul (a 64-bit unsigned long, then
// truncated to 32 bits, as memcached does on 64-bit machines).
func safeStrtoul(b []byte) (uint32, bool) {
	v, ok := safeStrtoull(b)
	return uint32(v), ok
}

// safeStrtol is memcached's safe_strtol: a 64-bit long truncated to 32
// bits (memcached does not range-check it on 64-bit machines).
func safeStrtol(b []byte) (int32, bool) {
	s := cstring(b)
	v, end, overflow := strtol(s)
	if overflow || !endOK(s, end) {
		return 0, false
	}
	return int32(v), true
}
