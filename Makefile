# psp: developer tasks. `make help` lists them.
#
# Guest toolchains for `make classifiers` (Debian 12):
#   apt-get install -y --no-install-recommends clang lld wabt \
#       rustc libstd-rust-dev-wasm32 make
# plus Go (GOOS=wasip1), Node.js >= 20 with npm >= 10 (AssemblyScript 0.28
# requires them), and `make classifiers-deps` (npm ci of the AssemblyScript
# compiler pinned in sdk/assemblyscript/package-lock.json), which
# `make classifiers` runs when needed.

.DEFAULT_GOAL := help
.DELETE_ON_ERROR:
SHELL := /bin/bash

GO       ?= go
CLANG    ?= clang
WAT2WASM ?= wat2wasm
RUSTC    ?= /usr/bin/rustc
NPM      ?= npm

# Where `make classifiers` writes the modules: by default next to their
# sources (the committed files). The tests rebuild into a temporary OUT.
OUT   ?= examples/classifiers
BUILD ?= out/build

EX     := examples/classifiers
ASDIR  := sdk/assemblyscript
ASC    := $(ASDIR)/node_modules/.bin/asc
# npm writes node_modules/.package-lock.json at install time (the files it
# unpacks keep the registry's 1985 timestamps): it tells whether the
# installed compiler is older than the lock file.
ASDEPS := $(ASDIR)/node_modules/.package-lock.json

CFLAGS    := --target=wasm32 -nostdlib -O2 -Wall -Wextra -Werror -Wl,--no-entry -Wl,--strip-all -I sdk/c
RUSTFLAGS := --edition 2021 --target wasm32-unknown-unknown -O
ASCFLAGS  := --runtime stub -O3 --noAssert --converge --use abort=

C_SRC    := $(wildcard $(EX)/c/*.c)
WAT_SRC  := $(wildcard $(EX)/wat/*.wat $(EX)/hostile/*.wat)
RUST_SRC := $(wildcard $(EX)/rust/*.rs)
AS_SRC   := $(wildcard $(EX)/assemblyscript/*.ts)

C_WASM    := $(patsubst $(EX)/%.c,$(OUT)/%.wasm,$(C_SRC))
WAT_WASM  := $(patsubst $(EX)/%.wat,$(OUT)/%.wasm,$(WAT_SRC))
RUST_WASM := $(patsubst $(EX)/%.rs,$(OUT)/%.wasm,$(RUST_SRC))
AS_WASM   := $(patsubst $(EX)/%.ts,$(OUT)/%.wasm,$(AS_SRC))
GO_WASM   := $(OUT)/go/pspheader.wasm

.PHONY: help classifiers classifiers-c classifiers-wat classifiers-rust \
	classifiers-assemblyscript classifiers-go classifiers-deps bench

help: ## list the targets
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "} {printf "  %-28s %s\n", $$1, $$2}'
	@echo "  variables: OUT=$(OUT) (where classifiers go), CLANG, WAT2WASM, RUSTC, GO, NPM,"
	@echo "             BENCH=ID,... (bench: only these groups; $(GO) run ./internal/cmd/benchdoc -list)"

classifiers: classifiers-c classifiers-wat classifiers-rust classifiers-assemblyscript classifiers-go ## rebuild every example classifier (.wasm) from source
classifiers-c: $(C_WASM) ## C examples (clang + lld)
classifiers-wat: $(WAT_WASM) ## WAT examples and hostile modules (wabt)
classifiers-rust: $(RUST_WASM) ## Rust examples (Debian rustc + libstd-rust-dev-wasm32)
classifiers-assemblyscript: $(AS_WASM) ## AssemblyScript examples (needs classifiers-deps)
classifiers-go: $(GO_WASM) ## Go example (GOOS=wasip1)

classifiers-deps: $(ASDEPS) ## install the pinned AssemblyScript compiler (npm ci)

BENCH ?=
bench: ## run the named benchmarks and write BENCHMARKS.md (a few minutes; BENCH=ID,... for some)
	$(GO) run ./internal/cmd/benchdoc -o BENCHMARKS.md $(if $(BENCH),-only $(BENCH))

$(ASDEPS): $(ASDIR)/package.json $(ASDIR)/package-lock.json
	cd $(ASDIR) && $(NPM) ci --no-audit --no-fund
	@touch $@

$(OUT)/c/%.wasm: $(EX)/c/%.c sdk/c/psp.h
	@mkdir -p $(@D)
	$(CLANG) $(CFLAGS) -o $@ $<

$(OUT)/%.wasm: $(EX)/%.wat
	@mkdir -p $(@D)
	$(WAT2WASM) $< -o $@

$(BUILD)/libpsp.rlib: sdk/rust/lib.rs
	@mkdir -p $(@D)
	$(RUSTC) $(RUSTFLAGS) --crate-type rlib --crate-name psp -o $@ $<

$(OUT)/rust/%.wasm: $(EX)/rust/%.rs $(BUILD)/libpsp.rlib
	@mkdir -p $(@D)
	$(RUSTC) $(RUSTFLAGS) --crate-type cdylib -C strip=symbols -C link-arg=-zstack-size=65536 \
		--extern psp=$(BUILD)/libpsp.rlib -o $@ $<

# asc's output depends on the source path it is given (it orders functions
# by internal names that include it): always compile from the source's
# directory, as the command at the top of each source does.
$(OUT)/assemblyscript/%.wasm: $(EX)/assemblyscript/%.ts $(ASDIR)/assembly/index.ts | $(ASDEPS)
	@mkdir -p $(@D)
	cd $(EX)/assemblyscript && $(abspath $(ASC)) $*.ts $(ASCFLAGS) -o $(abspath $@)

$(GO_WASM): $(wildcard $(EX)/go/*.go) $(wildcard sdk/go/*.go) go.mod
	@mkdir -p $(@D)
	cd $(EX)/go && GOOS=wasip1 GOARCH=wasm $(GO) build -buildmode=c-shared -trimpath -buildvcs=false -o $(abspath $@) .
