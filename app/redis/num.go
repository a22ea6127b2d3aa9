package redis

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// strtod parses the longest prefix of p that C's strtod accepts (after
// leading white space: decimal and hexadecimal numbers, inf, infinity and
// nan, any case) and returns the value and how many bytes it used (0 when
// none), and whether the value overflowed or underflowed to zero
// (strtod's ERANGE).
func strtod(p []byte) (v float64, n int, erange bool) {
	i := 0
	for i < len(p) && isSpace(p[i]) {
		i++
	}
	start := i
	if i < len(p) && (p[i] == '+' || p[i] == '-') {
		i++
	}
	// inf, infinity, nan.
	if rest := p[i:]; len(rest) >= 3 {
		switch {
		case hasPrefixFold(rest, "infinity"):
			return signed(p[start], math.Inf(1)), i + 8, false
		case hasPrefixFold(rest, "inf"):
			return signed(p[start], math.Inf(1)), i + 3, false
		case hasPrefixFold(rest, "nan"):
			j := i + 3
			if j < len(p) && p[j] == '(' { // nan(chars)
				k := j + 1
				for k < len(p) && (isAlnum(p[k]) || p[k] == '_') {
					k++
				}
				if k < len(p) && p[k] == ')' {
					j = k + 1
				}
			}
			return math.NaN(), j, false
		}
	}
	hex := i+1 < len(p) && p[i] == '0' && (p[i+1] == 'x' || p[i+1] == 'X')
	if hex {
		j := i + 2
		digits := 0
		for j < len(p) && isHex(p[j]) {
			j++
			digits++
		}
		if j < len(p) && p[j] == '.' {
			j++
			for j < len(p) && isHex(p[j]) {
				j++
				digits++
			}
		}
		if digits == 0 {
			// "0x" alone: strtod reads the 0.
			return signed(p[start], 0), i + 1, false
		}
		mant := j
		j = skipExponent(p, j, 'p')
		s := string(p[start:j])
		if j == mant {
			s += "p0"
		}
		v, err := strconv.ParseFloat(s, 64)
		return v, j, err != nil
	}
	j := i
	digits, nonzero := 0, false
	for j < len(p) && p[j] >= '0' && p[j] <= '9' {
		nonzero = nonzero || p[j] != '0'
		j++
		digits++
	}
	if j < len(p) && p[j] == '.' {
		j++
		for j < len(p) && p[j] >= '0' && p[j] <= '9' {
			nonzero = nonzero || p[j] != '0'
			j++
			digits++
		}
	}
	if digits == 0 {
		return 0, 0, false
	}
	j = skipExponent(p, j, 'e')
	v, err := strconv.ParseFloat(bytesString(p[start:j]), 64)
	switch {
	case err != nil:
		return v, j, true // overflow: ±Inf
	case v == 0 && nonzero:
		return v, j, true // underflow to zero
	}
	return v, j, false
}

func signed(sign byte, v float64) float64 {
	if sign == '-' {
		return -v
	}
	return v
}

func hasPrefixFold(p []byte, s string) bool {
	return len(p) >= len(s) && equalFold(p[:len(s)], s)
}

func isAlnum(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// parseDouble is redis-server's string2d: the whole of p is a number
// strtod reads, without leading space, not NaN, not out of range.
func parseDouble(p []byte) (float64, bool) {
	if len(p) == 0 || isSpace(p[0]) {
		return 0, false
	}
	v, n, erange := strtod(p)
	if n != len(p) || math.IsNaN(v) || (erange && (math.IsInf(v, 0) || v == 0)) {
		return 0, false
	}
	return v, true
}

// parseRangeBound is how ZRANGEBYSCORE and ZCOUNT read a bound: strtod
// over the C string (leading space allowed), a '(' making it exclusive.
func parseRangeBound(p []byte) (v float64, exclusive, ok bool) {
	p = cstr(p)
	if len(p) > 0 && p[0] == '(' {
		p, exclusive = p[1:], true
	}
	v, n, _ := strtod(p)
	if n != len(p) || math.IsNaN(v) {
		return 0, false, false
	}
	return v, exclusive, true
}

// Long doubles: redis-server's INCRBYFLOAT and HINCRBYFLOAT compute in the
// x87's 80-bit long double (64-bit mantissa, 15-bit exponent) and print
// with "%.17Lf"; big.Float at 64 bits of precision rounds the same way.
const ldPrec = 64

// ldMaxExp is the binary exponent past which a long double is infinite
// (big.Float's MantExp: x = mant * 2^exp with 0.5 <= |mant| < 1).
const ldMaxExp = 16384

// parseLongDouble is redis-server's string2ld.
func parseLongDouble(p []byte) (*big.Float, bool) {
	if len(p) == 0 || isSpace(p[0]) || len(p) >= 5*1024 {
		return nil, false
	}
	_, n, _ := strtod(p)
	if n != len(p) {
		return nil, false
	}
	s := string(p)
	ls := strings.ToLower(strings.TrimLeft(s, "+-"))
	switch {
	case strings.HasPrefix(ls, "nan"):
		return nil, false
	case strings.HasPrefix(ls, "inf"):
		return new(big.Float).SetInf(s[0] == '-'), true
	case strings.HasPrefix(ls, "0x") && !strings.ContainsAny(ls, "pP"):
		if ls == "0x" || ls == "0x." {
			s = strings.TrimSuffix(strings.TrimSuffix(s, "."), "x") // "0x": the 0
			s = strings.TrimSuffix(s, "X")
		} else {
			s += "p0"
		}
	}
	f, _, err := big.ParseFloat(s, 0, ldPrec, big.ToNearestEven)
	if err != nil {
		return nil, false
	}
	if f.IsInf() || f.MantExp(nil) > ldMaxExp {
		return nil, false // out of range: strtold's HUGE_VALL
	}
	if f.Sign() != 0 && f.MantExp(nil) < -16445 {
		return nil, false // underflow to zero
	}
	return f, true
}

// ldOverflows reports whether f is out of a long double's range (an
// infinite result).
func ldOverflows(f *big.Float) bool { return f.IsInf() || f.MantExp(nil) > ldMaxExp }

// formatLongDouble is redis-server's ld2string in its human mode: %.17Lf
// with the trailing zeros (and a trailing dot) removed, "-0" as "0".
func formatLongDouble(f *big.Float) string {
	if f.IsInf() {
		if f.Sign() < 0 {
			return "-inf"
		}
		return "inf"
	}
	s := f.Text('f', 17)
	if strings.IndexByte(s, '.') >= 0 {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return s
}

// d2string is redis-server's d2string, the way a small sorted set stores
// (and ZSCAN shows) a score: integers in full, other values as %.17g.
func d2string(dst []byte, d float64) []byte {
	switch {
	case math.IsNaN(d):
		return append(dst, "nan"...)
	case math.IsInf(d, 1):
		return append(dst, "inf"...)
	case math.IsInf(d, -1):
		return append(dst, "-inf"...)
	case d == 0:
		if math.Signbit(d) {
			return append(dst, "-0"...)
		}
		return append(dst, '0')
	}
	if d >= -(1<<62) && d <= 1<<62 {
		if ll := int64(d); float64(ll) == d {
			return strconv.AppendInt(dst, ll, 10)
		}
	}
	return strconv.AppendFloat(dst, d, 'g', 17, 64)
}

// strtoul is C's strtoul in base 10 for a SCAN cursor (redis-server's
// parseScanCursorOrReply): leading space refused, an optional sign (a
// minus negates), the whole C string consumed, within 64 bits.
func parseCursor(p []byte) (uint64, bool) {
	p = cstr(p)
	if len(p) > 0 && isSpace(p[0]) {
		return 0, false
	}
	i, neg := 0, false
	if i < len(p) && (p[i] == '+' || p[i] == '-') {
		neg = p[i] == '-'
		i++
	}
	start := i
	var v uint64
	for ; i < len(p) && p[i] >= '0' && p[i] <= '9'; i++ {
		d := uint64(p[i] - '0')
		if v > (math.MaxUint64-d)/10 {
			return 0, false // ERANGE
		}
		v = v*10 + d
	}
	if i == start {
		// No digits: strtoul consumes nothing, so only "" is accepted.
		return 0, len(p) == 0
	}
	if i != len(p) {
		return 0, false
	}
	if neg {
		v = -v
	}
	return v, true
}

// glob is a MATCH or KEYS pattern ready to test many names: the common
// shapes (*, a literal, lit*, *lit, *lit*) by a comparison, the others by
// stringMatch, with stringMatch's answers, but for "*", which matches
// every name, the empty one included, as KEYS and SCAN take it. The zero
// glob is "*".
type glob struct {
	shape globShape
	lit   []byte // the literal part (globPrefix ... globContains)
	pat   []byte // globGeneral: the pattern
}

type globShape uint8

const (
	globAll globShape = iota
	globLiteral
	globPrefix
	globSuffix
	globContains
	globNonEmpty // "**" and more stars: stringMatch refuses the empty name
	globGeneral
)

// compileGlob returns pattern's glob.
func compileGlob(pattern []byte) glob {
	if len(pattern) == 0 {
		return glob{shape: globLiteral} // matches "" only
	}
	lead := len(pattern) > 0 && pattern[0] == '*'
	trail := len(pattern) > 1 && pattern[len(pattern)-1] == '*' && pattern[len(pattern)-2] != '\\'
	lit := pattern
	if lead {
		lit = lit[1:]
	}
	if trail && len(lit) > 0 {
		lit = lit[:len(lit)-1]
	}
	for len(lit) > 0 && lead && lit[0] == '*' { // "**x": as "*x"
		lit = lit[1:]
	}
	if bytes.ContainsAny(lit, "*?[\\") {
		return glob{shape: globGeneral, pat: pattern}
	}
	switch {
	case lead && (trail || len(lit) == 0):
		switch {
		case len(pattern) == 1:
			return glob{shape: globAll}
		case len(lit) == 0:
			return glob{shape: globNonEmpty}
		}
		return glob{shape: globContains, lit: lit}
	case lead:
		return glob{shape: globSuffix, lit: lit}
	case trail:
		return glob{shape: globPrefix, lit: lit}
	}
	return glob{shape: globLiteral, lit: lit}
}

// all reports whether g matches every name.
func (g *glob) all() bool { return g.shape == globAll }

// match reports whether name matches g, as stringMatch would.
func (g *glob) match(name []byte) bool {
	switch g.shape {
	case globAll:
		return true
	case globLiteral:
		return bytes.Equal(name, g.lit)
	case globPrefix:
		return bytes.HasPrefix(name, g.lit)
	case globSuffix:
		return bytes.HasSuffix(name, g.lit)
	case globContains:
		return bytes.Contains(name, g.lit)
	case globNonEmpty:
		return len(name) > 0
	}
	return stringMatch(g.pat, name)
}

// stringMatch is redis-server's glob matching (stringmatchlen): * ? [...]
// with ranges and ^, and \ escapes.
func stringMatch(pattern, s []byte) bool {
	skip := false
	return matchImpl(pattern, s, &skip)
}

func matchImpl(pattern, str []byte, skipLonger *bool) bool {
	p, plen := 0, len(pattern) // pattern[p:], plen bytes left
	at := func(i int) byte {   // the pattern as a C string
		if i < len(pattern) {
			return pattern[i]
		}
		return 0
	}
	for plen > 0 && len(str) > 0 {
		switch pattern[p] {
		case '*':
			for plen > 0 && at(p+1) == '*' {
				p++
				plen--
			}
			if plen == 1 {
				return true
			}
			for len(str) > 0 {
				if matchImpl(pattern[p+1:p+plen], str, skipLonger) {
					return true
				}
				if *skipLonger {
					return false
				}
				str = str[1:]
			}
			*skipLonger = true
			return false
		case '?':
			str = str[1:]
		case '[':
			p++
			plen--
			not := at(p) == '^'
			if not {
				p++
				plen--
			}
			match := false
			for {
				if at(p) == '\\' && plen >= 2 {
					p++
					plen--
					if pattern[p] == str[0] {
						match = true
					}
				} else if at(p) == ']' {
					break
				} else if plen == 0 {
					p--
					plen++
					break
				} else if plen >= 3 && pattern[p+1] == '-' {
					start, end, c := int8(pattern[p]), int8(pattern[p+2]), int8(str[0])
					if start > end {
						start, end = end, start
					}
					p += 2
					plen -= 2
					if c >= start && c <= end {
						match = true
					}
				} else if pattern[p] == str[0] {
					match = true
				}
				p++
				plen--
			}
			if not {
				match = !match
			}
			if !match {
				return false
			}
			str = str[1:]
		case '\\':
			if plen >= 2 {
				p++
				plen--
			}
			fallthrough
		default:
			if pattern[p] != str[0] {
				return false
			}
			str = str[1:]
		}
		p++
		plen--
		if len(str) == 0 {
			for at(p) == '*' {
				p++
				plen--
			}
			break
		}
	}
	return plen == 0 && len(str) == 0
}

// skipExponent returns where an exponent at p[j] ends: marker (a lower-case
// letter, either case matching), an optional sign and at least one digit;
// j itself when p[j:] starts with no such exponent.
func skipExponent(p []byte, j int, marker byte) int {
	if j >= len(p) || p[j]|0x20 != marker {
		return j
	}
	k := j + 1
	if k < len(p) && (p[k] == '+' || p[k] == '-') {
		k++
	}
	if k >= len(p) || p[k] < '0' || p[k] > '9' {
		return j
	}
	for k < len(p) && p[k] >= '0' && p[k] <= '9' {
		k++
	}
	return k
}
