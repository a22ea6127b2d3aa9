//go:build !unix

package boundedfile

import "os"

// openNonBlocking opens path.
func openNonBlocking(path string) (*os.File, error) { return os.Open(path) }
