// Package boundedfile reads the files users name (configs, workloads,
// classifiers, results, tokens) with a bound on what is read: a path that
// names a device (/dev/zero), a FIFO, a socket or a directory is refused
// before anything is read, and so is a regular file larger than the
// bound, or one that grows past it while being read. A FIFO is opened
// without blocking, so naming one never hangs.
//
// Read and Open are safe for concurrent use; the caller closes what Open
// returns.
package boundedfile
