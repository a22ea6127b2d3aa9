package wasmclass

import (
	"context"
	"errors"
	"runtime"
	"testing"
)

// A swap that reaches the compiler after its host closed, or is compiling
// while it closes (a tenant removed while its classifier is pushed), must
// fail with ErrClosed, not compile into the closed compilation cache: its
// engine is freed by the close, and wazero panicked writing to it
// ("assignment to entry in nil map" in addCompiledModuleToMemory; 99 of
// the swaps racing removals over the admin API, which net/http turned into
// connections closed without an answer; in an abandoned compilation's
// goroutine, the process would have died).
func TestSwapAfterOrDuringCloseIsErrClosed(t *testing.T) {
	ctx := context.Background()
	spec := HostSpec{
		Name: "a", Wasm: fixture(t, "good"),
		Options: Options{CacheDir: t.TempDir()},
	}

	t.Run("after", func(t *testing.T) {
		h := newTestHost(t, spec)
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Swap(ctx, fixture(t, "const1")); !errors.Is(err, ErrClosed) {
			t.Fatalf("swap after close: %v, want ErrClosed", err)
		}
	})

	t.Run("during", func(t *testing.T) {
		h := newTestHost(t, spec)
		// Hold every compile slot, so that the swap waits in the compiler
		// while the host closes.
		prev := SetCompileConcurrency(1)
		defer SetCompileConcurrency(prev)
		hold, err := compileSlots.acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer hold()
		mod := fixture(t, "const1")
		errc := make(chan error, 1)
		go func() {
			_, err := h.Swap(ctx, mod)
			errc <- err
		}()
		// Two uses of the cache: the load's and its compilation's, which
		// then waits for the slot.
		for h.cache.inUse() < 2 {
			runtime.Gosched()
		}
		if err := h.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if h.cache.isClosed() {
			t.Fatal("the cache closed under a compilation still using it")
		}
		hold()
		if err := <-errc; !errors.Is(err, ErrClosed) {
			t.Fatalf("swap during close: %v, want ErrClosed", err)
		}
		if !h.cache.isClosed() || h.cache.inUse() != 0 {
			t.Fatalf("after the last compilation: cache closed %v, in use %d; want closed, 0", h.cache.isClosed(), h.cache.inUse())
		}
	})
}
