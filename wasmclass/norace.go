//go:build !race

package wasmclass

const raceBuild = false
