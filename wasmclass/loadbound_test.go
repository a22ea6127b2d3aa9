package wasmclass

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/persephone-go/psp/wasmclass/internal/wasmbin"
)

// worstModules are modules built to make compilation as slow and as large
// as the structural bounds allow.
func worstModules() map[string][]byte {
	b := DefaultBounds
	out := map[string][]byte{}
	copies := func(n int, f advFunc) []advFunc {
		fs := make([]advFunc, n)
		for k := range fs {
			fs[k] = f
		}
		return fs
	}
	// Straight-line code: the code size bound in functions of the body
	// size bound.
	var line []byte
	for len(line) < b.FunctionBytes-64 {
		line = append(line, cat(lget(0), i32c(12345), []byte{0x6c}, lget(0), []byte{0x73}, lset(0))...)
	}
	out["straight-line code"] = advModule{extra: copies(b.CodeBytes/(b.FunctionBytes+64), advFunc{locals: i32Local, body: line})}.build()
	// A deep operand stack: every value live until the end of the body.
	var deep []byte
	n := (b.FunctionBytes - 64) / 6
	for k := 0; k < n; k++ {
		deep = append(deep, cat(lget(0), []byte{0x41, 0x01, 0x6c})...)
	}
	deep = append(deep, bytes.Repeat([]byte{0x6a}, n-1)...)
	deep = append(deep, 0x1a)
	out["deep operand stack"] = advModule{extra: copies(b.CodeBytes/(b.FunctionBytes+64), advFunc{params: []byte{wasmbin.I32}, body: deep})}.build()
	// As many small functions as allowed.
	out["many functions"] = advModule{extra: copies(b.Functions-16, advFunc{body: cat(i32c(1), []byte{0x1a})})}.build()
	// Direct calls, up to the bound.
	out["direct calls"] = advModule{extra: copies(b.Calls/(b.FunctionBytes/2)+1, advFunc{body: bytes.Repeat([]byte{0x10, 0x07}, min(b.FunctionBytes/2-8, b.Calls/4))})}.build()
	// Blocks: the most a function may hold, nested as deep as allowed.
	var nest []byte
	for n := 0; n+b.Nesting <= b.Blocks-64; n += b.Nesting {
		nest = append(nest, bytes.Repeat([]byte{0x02, 0x40}, b.Nesting)...)
		nest = append(nest, bytes.Repeat([]byte{0x0b}, b.Nesting)...)
	}
	out["blocks"] = advModule{extra: []advFunc{{body: nest}}}.build()
	// Many locals live across many blocks (SSA phis): locals x blocks at
	// the bound in as many functions as the blocks-squared bound allows.
	nl := b.Locals
	blocks := b.LocalsXBlocks/nl - 1
	var lb []byte
	for k := 0; k < blocks; k++ {
		lb = append(lb, 0x02, 0x40)
		lb = append(lb, i32c(int32(k))...)
		lb = append(lb, lset(uint32(k%nl))...)
		lb = append(lb, 0x0b)
	}
	out["locals x blocks"] = advModule{extra: copies(b.BlocksSquared/(blocks*blocks), advFunc{locals: []wasmbin.LocalDecl{{Count: uint32(nl), Type: wasmbin.I32}}, body: lb})}.build()
	out["br_tables"] = brTablesModule(b.BrTableTotal / b.BrTable)
	return out
}

// brTablesModule has n functions, each a br_table of the most targets the
// default bounds allow, into 64 blocks: the slowest shape to compile per
// byte (past n = BrTableTotal/BrTable, over the bounds: for the compile
// child alone).
func brTablesModule(n int) []byte {
	b := DefaultBounds
	const depth = 64
	var bt []byte
	bt = append(bt, bytes.Repeat([]byte{0x02, 0x40}, depth)...)
	bt = append(bt, i32c(0)...)
	bt = append(bt, 0x0e)
	bt = append(bt, u32(uint32(b.BrTable-1))...)
	for k := 0; k < b.BrTable-1; k++ {
		bt = append(bt, byte(k%depth))
	}
	bt = append(bt, 0)
	bt = append(bt, bytes.Repeat([]byte{0x0b}, depth)...)
	fs := make([]advFunc, n)
	for k := range fs {
		fs[k] = advFunc{body: bt}
	}
	return advModule{extra: fs}.build()
}

// BenchmarkLoadWorst loads the worst modules within the default bounds in
// a compile child, as psp serve does, and prints the load time and the
// child's peak memory.
func BenchmarkLoadWorst(b *testing.B) {
	for name, bin := range worstModules() {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				start := time.Now()
				m, err := Load(context.Background(), bin, Options{CompileInChild: true})
				d := time.Since(start)
				if err != nil {
					fmt.Fprintf(os.Stdout, "%-16s %8d bytes: refused after %v: %v\n", name, len(bin), d.Round(time.Millisecond), err)
					continue
				}
				c := m.Info().Compile
				fmt.Fprintf(os.Stdout, "%-16s %8d bytes: loaded in %v (compile %v), child peak RSS %d MiB\n",
					name, len(bin), d.Round(time.Millisecond), c.Duration.Round(time.Millisecond), c.ChildMaxRSS>>20)
				_ = m.Close(context.Background())
			}
		})
	}
}
