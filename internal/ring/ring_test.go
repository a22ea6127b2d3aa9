package ring

import (
	"fmt"
	"runtime"
	"testing"
)

func TestNewRoundsUpToPowerOfTwo(t *testing.T) {
	for _, tc := range []struct{ in, want int }{{1, 1}, {2, 2}, {3, 4}, {5, 8}, {1000, 1024}, {1024, 1024}} {
		if got := New[int](tc.in).Cap(); got != tc.want {
			t.Errorf("New(%d).Cap() = %d, want %d", tc.in, got, tc.want)
		}
	}
}

func TestNewPanicsOnBadCapacity(t *testing.T) {
	for _, c := range []int{0, -1} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("New(%d) did not panic", c)
				}
			}()
			New[int](c)
		}()
	}
}

func TestFullEmptyAndOrder(t *testing.T) {
	r := New[int](4)
	if _, ok := r.Pop(); ok {
		t.Fatal("Pop on an empty ring succeeded")
	}
	for round := 0; round < 3; round++ { // wrap around several times
		for i := 0; i < 4; i++ {
			if !r.Push(round*10 + i) {
				t.Fatalf("round %d: Push %d failed on a ring with room", round, i)
			}
		}
		if r.Push(99) {
			t.Fatalf("round %d: Push succeeded on a full ring", round)
		}
		if r.Len() != 4 {
			t.Fatalf("round %d: Len = %d, want 4", round, r.Len())
		}
		for i := 0; i < 4; i++ {
			v, ok := r.Pop()
			if !ok || v != round*10+i {
				t.Fatalf("round %d: Pop = %d, %v; want %d, true", round, v, ok, round*10+i)
			}
		}
		if _, ok := r.Pop(); ok || r.Len() != 0 {
			t.Fatalf("round %d: ring not empty after popping everything", round)
		}
	}
}

func TestPopClearsSlot(t *testing.T) {
	r := New[*int](2)
	x := 1
	r.Push(&x)
	r.Pop()
	for i, p := range r.slots {
		if p != nil {
			t.Fatalf("slot %d still references a popped item", i)
		}
	}
}

func TestPushPopAllocateNothing(t *testing.T) {
	r := New[*int](8)
	x := 7
	allocs := testing.AllocsPerRun(1000, func() {
		r.Push(&x)
		if _, ok := r.Pop(); !ok {
			t.Fatal("Pop failed")
		}
	})
	if allocs != 0 {
		t.Fatalf("Push+Pop allocated %.1f times per run, want 0", allocs)
	}
}

// TestHammer runs a producer and a consumer on two Ps through a small ring
// (so that it is often full and often empty) and checks that every item
// arrives exactly once and in order.
func TestHammer(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	n := 1_000_000
	if testing.Short() {
		n = 100_000
	}
	r := New[uint64](64)
	done := make(chan error, 1)
	go func() {
		var want uint64
		for want < uint64(n) {
			v, ok := r.Pop()
			if !ok {
				runtime.Gosched()
				continue
			}
			if v != want {
				done <- fmt.Errorf("consumer saw item %d, want %d (lost, duplicated or reordered)", v, want)
				return
			}
			want++
		}
		if _, ok := r.Pop(); ok {
			done <- fmt.Errorf("ring not empty after %d items", n)
			return
		}
		done <- nil
	}()
	for i := uint64(0); i < uint64(n); {
		if r.Push(i) {
			i++
		} else {
			runtime.Gosched()
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
