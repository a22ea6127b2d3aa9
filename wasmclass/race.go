//go:build race

package wasmclass

// raceBuild: the race detector's runtime maps terabytes of shadow memory
// when it starts, so a compile child built with it cannot start under an
// address-space limit; it sets that limit itself once started.
const raceBuild = true
