// Package resp encodes pieces of Redis's protocol (RESP2) shared by the
// Redis application and the load generator. Its functions append to a
// caller's slice, allocate only when that slice grows, and are safe for
// concurrent use.
package resp

import "strconv"

// AppendBulk appends p as a RESP bulk string ($<len>\r\n<p>\r\n) to b.
func AppendBulk[T string | []byte](b []byte, p T) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(p)), 10)
	b = append(b, '\r', '\n')
	b = append(b, p...)
	return append(b, '\r', '\n')
}
