//! The psp request header classifier: the type is the u32 (little-endian) at
//! offset 4 of the 16-byte header (see wire/wire.go).
//!
//! Build (`make classifiers` from the repository root, or from this directory):
//! /usr/bin/rustc --edition 2021 --target wasm32-unknown-unknown -O --crate-type rlib --crate-name psp -o /tmp/libpsp.rlib ../../../sdk/rust/lib.rs
//! /usr/bin/rustc --edition 2021 --target wasm32-unknown-unknown -O --crate-type cdylib -C strip=symbols -C link-arg=-zstack-size=65536 --extern psp=/tmp/libpsp.rlib -o pspheader.wasm pspheader.rs
#![no_std]

use psp::psp_classifier;

const NUM_TYPES: u32 = 12;

fn classify(payload: &[u8], _wirelen: u32) -> u32 {
    if payload.len() < 16 {
        return 0;
    }
    match psp::u32_le(payload, 4) {
        Some(t) if t < NUM_TYPES => t,
        _ => 0,
    }
}

psp_classifier!(
    classify,
    12,
    "UNKNOWN\nSHORT\nLONG\n\n\nNewOrder\nPayment\nDelivery\nOrderStatus\nStockLevel\nGET\nSCAN"
);
