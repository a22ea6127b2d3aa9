package redis

import (
	"bytes"
	"strconv"
)

// COMMAND INFO's and COMMAND DOCS's nested replies are kept as
// redis-server sends them in RESP2 (specs.go, docs_gen.go); in RESP3
// redis-server sends their maps as maps and their flags, tips, key specs
// and histories as sets. commandShape names what each part is, and
// toRESP3 rewrites a RESP2 part in RESP3 by it.
type commandShape uint8

const (
	shapeAsIs    commandShape = iota // arrays stay arrays, all the way down
	shapeSet                         // a set of values as they are
	shapeDocs                        // a command's documentation map
	shapeArgs                        // an array of argument maps
	shapeArg                         // an argument's map
	shapeSpecs                       // a set of key spec maps
	shapeSpec                        // a key spec's map
	shapeSearch                      // begin_search, find_keys: a map
	shapeMapAsIs                     // a map of values as they are
)

// valueShape is the shape of the value under key in a map of shape s.
func valueShape(s commandShape, key []byte) commandShape {
	k := string(key)
	switch s {
	case shapeDocs:
		switch k {
		case "doc_flags", "history":
			return shapeSet
		case "arguments":
			return shapeArgs
		}
	case shapeArg:
		switch k {
		case "flags":
			return shapeSet
		case "arguments":
			return shapeArgs
		}
	case shapeSpec:
		switch k {
		case "flags":
			return shapeSet
		case "begin_search", "find_keys":
			return shapeSearch
		}
	case shapeSearch:
		if k == "spec" {
			return shapeMapAsIs
		}
	}
	return shapeAsIs
}

// toRESP3 appends to dst the first value of src, a well-formed RESP2
// reply, rewritten in RESP3 as shape s says, and returns the rest of src.
func toRESP3(dst, src []byte, s commandShape) ([]byte, []byte) {
	i := bytes.IndexByte(src, '\n')
	if i < 0 {
		return append(dst, src...), nil
	}
	line := src[:i+1]
	src = src[i+1:]
	n, _ := strconv.Atoi(string(line[1 : len(line)-2]))
	switch line[0] {
	case '$':
		dst = append(dst, line...)
		if n >= 0 {
			dst = append(dst, src[:n+2]...)
			src = src[n+2:]
		}
		return dst, src
	case '*':
	default:
		return append(dst, line...), src
	}
	switch s {
	case shapeDocs, shapeArg, shapeSpec, shapeSearch, shapeMapAsIs:
		dst = append(dst, '%')
		dst = strconv.AppendInt(dst, int64(n/2), 10)
		dst = append(dst, '\r', '\n')
		for range n / 2 {
			keyStart := len(dst)
			dst, src = toRESP3(dst, src, shapeAsIs)
			key := dst[keyStart:]
			if j := bytes.IndexByte(key, '\n'); j >= 0 && len(key) >= j+3 {
				key = key[j+1 : len(key)-2]
			}
			dst, src = toRESP3(dst, src, valueShape(s, key))
		}
		return dst, src
	}
	elem := shapeAsIs
	switch s {
	case shapeSet:
		dst = append(dst, '~')
	case shapeSpecs:
		dst = append(dst, '~')
		elem = shapeSpec
	case shapeArgs:
		dst = append(dst, '*')
		elem = shapeArg
	default:
		dst = append(dst, '*')
	}
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, '\r', '\n')
	for range n {
		dst, src = toRESP3(dst, src, elem)
	}
	return dst, src
}

// writeShaped writes a RESP2 part of COMMAND's replies (one value) in the
// connection's protocol.
func (o *out) writeShaped(resp2 string, s commandShape) {
	if !o.resp3 {
		o.writeString(resp2)
		return
	}
	b, _ := toRESP3(nil, []byte(resp2), s)
	o.write(b)
}
