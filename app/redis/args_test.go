package redis

import (
	"bytes"
	"testing"
)

// FuzzLengthAt: the one-pass read of a length line gives what searching
// for its end and reading it with string2ll gives.
func FuzzLengthAt(f *testing.F) {
	for _, s := range []string{"3\r\n", "0\r\n", "01\r\n", "-1\r\n", "123456789\r\n", "1234567890\r\n", "12\r", "7", "\r\n", "9x\r\n", "00\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, p []byte) {
		n, next, ok := lengthAt(p, 0)
		cr := bytes.IndexByte(p, '\r')
		if cr < 0 {
			if ok {
				t.Fatalf("%q: read %d without a line end", p, n)
			}
			return
		}
		wn, wok := string2ll(p[:cr])
		if ok != wok || (ok && (n != wn || next != cr+2)) {
			t.Fatalf("%q: lengthAt %d %d %v, string2ll %d %v (line end at %d)", p, n, next, ok, wn, wok, cr)
		}
	})
}

// FuzzShortLength: where the framer's one-pass read of an argument head
// answers, it answers what redis-server's reading of the head gives.
func FuzzShortLength(f *testing.F) {
	for _, s := range []string{"$3\r\n", "$0\r\n", "$01\r\n", "$-1\r\n", "$123456789\r\n", "$1234567890\r\n", "$12\r", "$7", "*3\r\n", "$\x00\r\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		n, cr, ok := shortLength(in, 0)
		if !ok {
			return
		}
		wcr := lineEnd(in, '\r')
		wn, wok := string2ll(in[1:max(wcr, 1)])
		if wcr != cr || cr > len(in)-2 || in[0] != '$' || !wok || wn != n {
			t.Fatalf("%q: shortLength %d %d, line end %d, string2ll %d %v", in, n, cr, wcr, wn, wok)
		}
	})
}
