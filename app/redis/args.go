package redis

import "bytes"

// request is a worker's parsed request: its arguments, and the room an
// inline command's arguments are unquoted into (both reused).
type request struct {
	argv   [][]byte
	inline []byte
	ends   []int
}

// parse splits the request at the head of p (a multibulk request or an
// inline line, as Frame cut it) into r.argv and returns its length. A
// multibulk request's arguments are slices of p; an inline command's are
// built in r.inline. It reports false for a payload Frame would not have
// cut (a datagram that is not one whole request, an empty line).
func (r *request) parse(p []byte) (int, bool) {
	r.argv = r.argv[:0]
	if len(p) == 0 {
		return 0, false
	}
	if p[0] != '*' {
		nl := lineEnd(p, '\n')
		if nl < 0 {
			return 0, false
		}
		line := p[:nl]
		if len(line) > 0 && line[len(line)-1] == '\r' {
			line = line[:len(line)-1]
		}
		r.inline, r.ends = r.inline[:0], r.ends[:0]
		n, ok := splitArgsInto(line, &r.inline, &r.ends)
		if !ok || n == 0 {
			return 0, false
		}
		start := 0
		for _, end := range r.ends {
			r.argv = append(r.argv, r.inline[start:end:end])
			start = end
		}
		return nl + 1, true
	}
	count, pos, ok := lengthAt(p, 1)
	if !ok || count <= 0 {
		return 0, false
	}
	for ; count > 0; count-- {
		if pos >= len(p) || p[pos] != '$' {
			return 0, false
		}
		var n int64
		n, pos, ok = lengthAt(p, pos+1)
		if !ok || n < 0 || int64(pos)+n+2 > int64(len(p)) {
			return 0, false
		}
		r.argv = append(r.argv, p[pos:pos+int(n):pos+int(n)])
		pos += int(n) + 2
	}
	return pos, true
}

// lengthAt reads the length line at p[i:] (after its '*' or '$') as
// redis-server does, up to its '\r', and returns the length and the index
// after the line (the byte after the '\r' taken for a '\n'). A short
// plain number, the common case, is read in one pass without searching
// for the line's end first.
func lengthAt(p []byte, i int) (n int64, next int, ok bool) {
	if n, cr, ok := shortNumber(p, i); ok {
		return n, cr + 2, true
	}
	cr := bytes.IndexByte(p[i:], '\r')
	if cr < 0 {
		return 0, 0, false
	}
	n, ok = string2ll(p[i : i+cr])
	return n, i + cr + 2, ok
}

// shortNumber reads the common length at p[i:], one to nine digits
// without a needless leading zero followed by '\r', in one pass: it
// returns the number and the index of the '\r', or false for anything
// else (which string2ll then reads as redis-server does).
func shortNumber(p []byte, i int) (n int64, cr int, ok bool) {
	j := i
	for j < len(p) && j-i < 9 && p[j]-'0' <= 9 {
		n = n*10 + int64(p[j]-'0')
		j++
	}
	if j < len(p) && p[j] == '\r' && j > i && (p[i] != '0' || j == i+1) {
		return n, j, true
	}
	return 0, 0, false
}

// splitArgs reports how many arguments redis-server's sdssplitargs finds
// in an inline command line (without its line end), and false for
// unbalanced quotes or a closing quote followed by something other than a
// space.
func splitArgs(line []byte) (int, bool) { return splitArgsInto(line, nil, nil) }

// splitArgsInto is splitArgs that also appends the arguments' bytes to
// *dst (when not nil), one after the other, and the end offset of each to
// *ends.
func splitArgsInto(line []byte, dst *[]byte, ends *[]int) (int, bool) {
	at := func(i int) byte { // the line as a C string
		if i < len(line) {
			return line[i]
		}
		return 0
	}
	put := func(c byte) {
		if dst != nil {
			*dst = append(*dst, c)
		}
	}
	argc, p := 0, 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) || line[p] == 0 {
			return argc, true
		}
		inq, insq := false, false
		for done := false; !done; {
			c := at(p)
			switch {
			case inq:
				switch {
				case c == '\\' && at(p+1) == 'x' && isHex(at(p+2)) && isHex(at(p+3)):
					put(hexVal(at(p+2))*16 + hexVal(at(p+3)))
					p += 3
				case c == '\\' && at(p+1) != 0:
					p++
					switch e := at(p); e {
					case 'n':
						put('\n')
					case 'r':
						put('\r')
					case 't':
						put('\t')
					case 'b':
						put('\b')
					case 'a':
						put('\a')
					default:
						put(e)
					}
				case c == '"':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return 0, false
					}
					done = true
				case c == 0:
					return 0, false
				default:
					put(c)
				}
			case insq:
				switch {
				case c == '\\' && at(p+1) == '\'':
					p++
					put('\'')
				case c == '\'':
					if n := at(p + 1); n != 0 && !isSpace(n) {
						return 0, false
					}
					done = true
				case c == 0:
					return 0, false
				default:
					put(c)
				}
			default:
				switch c {
				case ' ', '\n', '\r', '\t', 0:
					done = true
				case '"':
					inq = true
				case '\'':
					insq = true
				default:
					put(c)
				}
			}
			if c != 0 {
				p++
			}
		}
		argc++
		if ends != nil {
			*ends = append(*ends, len(*dst))
		}
	}
}

// isSpace is C's isspace in the C locale.
func isSpace(c byte) bool { return c == ' ' || (c >= '\t' && c <= '\r') }

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) byte {
	switch {
	case c >= '0' && c <= '9':
		return c - '0'
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10
	}
	return 0
}
