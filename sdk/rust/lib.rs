//! psp: write a psp request classifier in Rust (ABI v1, see sdk/ABI.md).
//!
//! A `no_std` crate with no dependencies. Write one function from a payload
//! to a request type and hand it to [`psp_classifier!`] once, at the root of
//! a `cdylib` crate:
//!
//! ```ignore
//! #![no_std]
//! use psp::psp_classifier;
//!
//! fn classify(payload: &[u8], wirelen: u32) -> u32 {
//!     match payload.get(4..8) {
//!         Some(b) if payload.len() >= 16 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) % 3,
//!         _ => 0, // 0 is UNKNOWN
//!     }
//! }
//!
//! psp_classifier!(classify, 3, "UNKNOWN\nSHORT\nLONG");
//! ```
//!
//! `payload` holds the first `caplen` bytes of the request (at most
//! [`PREFIX`]); `wirelen` is its real length. Return a type in `0..N`:
//! anything else is counted as a fault by the host and the packet goes to
//! UNKNOWN. The function must not keep state that changes its answers.
//!
//! This crate also defines the `#[panic_handler]` (a panic traps, which the
//! host counts as a fault and answers UNKNOWN), so the classifier crate
//! needs none.
//!
//! Build (Debian's rustc with `libstd-rust-dev-wasm32`; no cargo needed):
//!
//! ```text
//! rustc --edition 2021 --target wasm32-unknown-unknown --crate-type rlib \
//!       -O --crate-name psp -o libpsp.rlib sdk/rust/lib.rs
//! rustc --edition 2021 --target wasm32-unknown-unknown --crate-type cdylib \
//!       -O -C strip=symbols --extern psp=libpsp.rlib -o classifier.wasm classifier.rs
//! ```
#![no_std]

/// The ABI version this crate implements.
pub const ABI_VERSION: i32 = 1;
/// Size of the results area at the start of the I/O buffer.
pub const IO_HEADER: usize = 128;
/// Stride of a slot.
pub const SLOT: usize = 256;
/// Payload bytes a slot can hold.
pub const PREFIX: usize = 248;
/// Slots the host fills per call, at most.
pub const MAX_BATCH: usize = 32;

/// One packet as the host writes it.
#[repr(C)]
pub struct Slot {
    /// Bytes present in `data` (<= PREFIX).
    pub caplen: u32,
    /// The payload's real length.
    pub wirelen: u32,
    /// The first `caplen` bytes of the payload.
    pub data: [u8; PREFIX],
}

impl Slot {
    /// The captured payload bytes. A `caplen` larger than the slot (which
    /// the host never writes) is cut to it.
    #[inline(always)]
    pub fn payload(&self) -> &[u8] {
        let n = self.caplen as usize;
        &self.data[..if n < PREFIX { n } else { PREFIX }]
    }
}

/// The I/O buffer: results, then the slots.
#[repr(C, align(8))]
pub struct Io {
    /// Types written by a batch, one per slot.
    pub results: [i32; IO_HEADER / 4],
    /// The packets.
    pub slots: [Slot; MAX_BATCH],
}

const _: () = assert!(core::mem::size_of::<Slot>() == SLOT);
const _: () = assert!(core::mem::size_of::<Io>() == IO_HEADER + SLOT * MAX_BATCH);

#[doc(hidden)]
pub static mut IO: Io = Io {
    results: [0; IO_HEADER / 4],
    slots: [EMPTY_SLOT; MAX_BATCH],
};

const EMPTY_SLOT: Slot = Slot { caplen: 0, wirelen: 0, data: [0; PREFIX] };

/// Reads a little-endian u32 at `off`, or `None` past the payload's end.
#[inline(always)]
pub fn u32_le(payload: &[u8], off: usize) -> Option<u32> {
    match payload.get(off..off + 4) {
        Some(b) => Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]])),
        None => None,
    }
}

#[doc(hidden)]
#[inline(always)]
pub fn io_buffer() -> i32 {
    // SAFETY: only the address is taken; the host writes the buffer between
    // calls and the guest is single-threaded.
    unsafe { core::ptr::addr_of!(IO) as i32 }
}

#[doc(hidden)]
#[inline(always)]
pub fn classify_one(f: fn(&[u8], u32) -> u32) -> i32 {
    // SAFETY: single-threaded guest; no reference outlives the call.
    let io = unsafe { &*core::ptr::addr_of!(IO) };
    let s = &io.slots[0];
    f(s.payload(), s.wirelen) as i32
}

#[doc(hidden)]
#[inline(always)]
pub fn classify_batch(f: fn(&[u8], u32) -> u32, n: i32) -> i32 {
    if n < 0 || n as usize > MAX_BATCH {
        return 0;
    }
    // SAFETY: single-threaded guest; no other reference to IO is live.
    let io = unsafe { &mut *core::ptr::addr_of_mut!(IO) };
    let n = n as usize;
    for (r, s) in io.results[..n].iter_mut().zip(io.slots[..n].iter()) {
        *r = f(s.payload(), s.wirelen) as i32;
    }
    n as i32
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    core::arch::wasm32::unreachable()
}

/// Defines every export of the ABI around a classifier function
/// `fn(payload: &[u8], wirelen: u32) -> u32` returning types `0..ntypes`,
/// with type names given as one string, one name per line (line i names
/// type i; an empty line leaves a type unnamed).
///
/// Use it once, at the root of the `cdylib` crate.
#[macro_export]
macro_rules! psp_classifier {
    ($f:path, $ntypes:expr, $names:expr) => {
        const _: () = assert!($ntypes >= 1 && $ntypes <= 65536, "ntypes out of range");
        static PSP_TYPE_NAMES: &str = $names;

        #[no_mangle]
        pub extern "C" fn psp_abi_version() -> i32 {
            $crate::ABI_VERSION
        }
        #[no_mangle]
        pub extern "C" fn psp_io_buffer() -> i32 {
            $crate::io_buffer()
        }
        #[no_mangle]
        pub extern "C" fn psp_io_buffer_size() -> i32 {
            ($crate::IO_HEADER + $crate::SLOT * $crate::MAX_BATCH) as i32
        }
        #[no_mangle]
        pub extern "C" fn psp_num_types() -> i32 {
            $ntypes
        }
        #[no_mangle]
        pub extern "C" fn psp_type_names() -> i32 {
            PSP_TYPE_NAMES.as_ptr() as i32
        }
        #[no_mangle]
        pub extern "C" fn psp_type_names_len() -> i32 {
            PSP_TYPE_NAMES.len() as i32
        }
        #[no_mangle]
        pub extern "C" fn psp_classify() -> i32 {
            $crate::classify_one($f)
        }
        #[no_mangle]
        pub extern "C" fn psp_classify_batch(n: i32) -> i32 {
            $crate::classify_batch($f, n)
        }
    };
}
