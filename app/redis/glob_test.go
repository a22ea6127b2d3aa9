package redis

import "testing"

// globCases are patterns of every shape, escapes and classes included.
var globCases = []string{"", "*", "**", "***", "key", "key:*", "*:1", "*ey*", "**1", "k*1", "key:1**", "ke?:1", "[kx]ey*",
	`key\*`, `*\*`, `\**`, `*\`, `\`, "*[", "a*b*", "*?", "?*", "*e\\y*"}

var globNames = []string{"", "key", "key:1", "key:12", "xey:1", "key*", "*", "ab", "k1", "\\", "ey", "a*b", "[", `e\y`, "key:1*"}

// matchWant is stringMatch's answer, but for "*", which KEYS and SCAN
// take as every name.
func matchWant(p, n string) bool { return p == "*" || stringMatch([]byte(p), []byte(n)) }

func TestGlobMatchesStringMatch(t *testing.T) {
	for _, p := range globCases {
		g := compileGlob([]byte(p))
		for _, n := range globNames {
			if got, want := g.match([]byte(n)), matchWant(p, n); got != want {
				t.Errorf("pattern %q (shape %d) on %q: %v, stringMatch says %v", p, g.shape, n, got, want)
			}
		}
	}
}

func FuzzGlobMatchesStringMatch(f *testing.F) {
	for _, p := range globCases {
		for _, n := range globNames {
			f.Add(p, n)
		}
	}
	f.Fuzz(func(t *testing.T, p, n string) {
		g := compileGlob([]byte(p))
		if got, want := g.match([]byte(n)), matchWant(p, n); got != want {
			t.Fatalf("pattern %q (shape %d) on %q: %v, stringMatch says %v", p, g.shape, n, got, want)
		}
	})
}
