//go:build unix

package oci

import "github.com/google/renameio/v2"

// replaceFile writes data to path through a temporary file in its
// directory, synced and renamed over path: a reader sees the old file or
// the new one, never part of one.
func replaceFile(path string, data []byte) error {
	return renameio.WriteFile(path, data, 0o600)
}
