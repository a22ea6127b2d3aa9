package wasmclass

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/tetratelabs/wazero"
)

// sharedCache is a Host's own compilation cache (and the directory it
// created for it), closed after the last compilation that uses it.
// Closing a wazero cache frees its engine, and a compilation still
// running in it (a swap racing Host.Close, or one abandoned at its
// timeout and finishing in the background) would write into the freed
// engine and panic in wazero. Safe for concurrent use.
type sharedCache struct {
	cache wazero.CompilationCache
	dir   string // removed once the cache is closed ("": none)

	mu      sync.Mutex
	users   int  // compilations using the cache
	closing bool // close was called: no new users; the last one closes it
	closed  bool
	err     error // of the close, for close's caller if it closed it
}

// use registers a compilation of the cache; call release when nothing of
// it uses the cache any more. It fails with ErrClosed once close has been
// called.
func (c *sharedCache) use() (release func(), err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return nil, fmt.Errorf("compilation cache: %w (the host is closing)", ErrClosed)
	}
	c.users++
	var once sync.Once
	return func() { once.Do(c.release) }, nil
}

func (c *sharedCache) release() {
	c.mu.Lock()
	c.users--
	last := c.closing && c.users == 0
	c.mu.Unlock()
	if last {
		c.shut()
	}
}

// close closes the cache now if no compilation uses it, else lets the
// last one close it; either way it refuses new users from now on.
func (c *sharedCache) close() error {
	c.mu.Lock()
	if c.closing {
		c.mu.Unlock()
		return nil
	}
	c.closing = true
	now := c.users == 0
	c.mu.Unlock()
	if !now {
		return nil
	}
	c.shut()
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// shut closes the cache and removes its directory, once.
func (c *sharedCache) shut() {
	var errs []error
	if c.cache != nil {
		errs = append(errs, c.cache.Close(context.Background()))
	}
	if c.dir != "" {
		errs = append(errs, os.RemoveAll(c.dir))
	}
	c.mu.Lock()
	c.closed, c.err = true, errors.Join(errs...)
	c.mu.Unlock()
}

// openCache opens a compilation cache in dir, creating dir.
func openCache(dir string) (wazero.CompilationCache, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("compilation cache: %w", err)
	}
	c, err := wazero.NewCompilationCacheWithDir(dir)
	if err != nil {
		return nil, fmt.Errorf("compilation cache %q: %w", dir, err)
	}
	return c, nil
}

// inUse returns the compilations using the cache (tests).
func (c *sharedCache) inUse() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.users
}

// isClosed reports whether the cache has been closed (tests).
func (c *sharedCache) isClosed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}
