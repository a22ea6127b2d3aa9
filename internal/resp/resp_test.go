package resp

import "testing"

func TestAppendBulk(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "$0\r\n\r\n"},
		{"key:1", "$5\r\nkey:1\r\n"},
		{"a\r\nb", "$4\r\na\r\nb\r\n"},
	} {
		if got := string(AppendBulk([]byte("x"), tc.in)); got != "x"+tc.want {
			t.Errorf("AppendBulk(%q) = %q, want %q", tc.in, got, "x"+tc.want)
		}
		if got := string(AppendBulk(nil, []byte(tc.in))); got != tc.want {
			t.Errorf("AppendBulk([]byte %q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
