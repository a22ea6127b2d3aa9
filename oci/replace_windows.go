package oci

import (
	"os"
	"path/filepath"
)

// replaceFile writes data to path through a temporary file in its
// directory, synced and renamed over path (os.Rename replaces an existing
// file on Windows): a reader sees the old file or the new one, never part
// of one. renameio, used elsewhere, does not build on Windows.
func replaceFile(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
