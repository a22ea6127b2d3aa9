// psp: write a psp request classifier in AssemblyScript (ABI v1, see
// sdk/ABI.md).
//
// This module owns the I/O buffer and exports the three ABI functions that
// do not depend on the classifier. A classifier module re-exports them and
// adds four small exports around one function from a payload to a type:
//
//   import { Packet, classifyBatch, classifyOne, typeNames, typeNamesLength }
//     from "../../../sdk/assemblyscript/assembly";
//   export { psp_abi_version, psp_io_buffer, psp_io_buffer_size }
//     from "../../../sdk/assemblyscript/assembly";
//
//   const NAMES = "UNKNOWN\nSHORT\nLONG";
//   function classify(p: Packet): u32 {
//     return p.caplen >= 16 ? p.u32le(4) % 3 : 0;
//   }
//   export function psp_num_types(): i32 { return 3; }
//   export function psp_type_names(): usize { return typeNames(NAMES); }
//   export function psp_type_names_len(): i32 { return typeNamesLength(NAMES); }
//   export function psp_classify(): i32 { return classifyOne(classify); }
//   export function psp_classify_batch(n: i32): i32 { return classifyBatch(n, classify); }
//
// Build with the stub runtime (no garbage collector; the classifier must not
// allocate per packet):
//
//   npx asc classifier.ts --runtime stub -O3 --noAssert --converge --use abort= -o classifier.wasm
//
// (--use abort= turns a failed check into a trap instead of an import.)

/** The ABI version this package implements. */
export const ABI_VERSION: i32 = 1;
/** Size of the results area at the start of the I/O buffer. */
export const IO_HEADER: i32 = 128;
/** Stride of a slot. */
export const SLOT: i32 = 256;
/** Payload bytes a slot can hold. */
export const PREFIX: i32 = 248;
/** Slots the host fills per call, at most. */
export const MAX_BATCH: i32 = 32;

const IO_SIZE: i32 = IO_HEADER + SLOT * MAX_BATCH;
const IO: usize = memory.data(IO_SIZE, 8);

/**
 * One packet in the I/O buffer: a view, valid during the call only.
 * `caplen` bytes of payload are present from `data`; `wirelen` is the
 * payload's real length.
 */
@final @unmanaged
export class Packet {
  caplen: u32;
  wirelen: u32;

  /** Address of the first payload byte. */
  @inline get data(): usize {
    return changetype<usize>(this) + 8;
  }

  /** Byte at `off` (the caller checks off < caplen). */
  @inline byte(off: i32): u32 {
    return load<u8>(changetype<usize>(this) + 8 + <usize>off);
  }

  /** Little-endian u32 at `off` (the caller checks off + 4 <= caplen). */
  @inline u32le(off: i32): u32 {
    return load<u32>(changetype<usize>(this) + 8 + <usize>off);
  }

  /** Little-endian u16 at `off` (the caller checks off + 2 <= caplen). */
  @inline u16le(off: i32): u32 {
    return load<u16>(changetype<usize>(this) + 8 + <usize>off);
  }
}

/** The packet in slot i (0 <= i < MAX_BATCH). */
@inline export function slot(i: i32): Packet {
  return changetype<Packet>(IO + <usize>IO_HEADER + <usize>(i * SLOT));
}

/** Classifies slot 0 with fn. */
@inline export function classifyOne(fn: (p: Packet) => u32): i32 {
  return <i32>fn(slot(0));
}

/** Classifies slots 0..n-1 with fn into the results area; returns n. */
@inline export function classifyBatch(n: i32, fn: (p: Packet) => u32): i32 {
  if (<u32>n > <u32>MAX_BATCH) return 0;
  let res = IO;
  let p = IO + <usize>IO_HEADER;
  const end = IO + (<usize>n << 2);
  while (res < end) {
    store<i32>(res, <i32>fn(changetype<Packet>(p)));
    res += 4;
    p += <usize>SLOT;
  }
  return n;
}

let namesBuf: usize = 0;

/**
 * Address of `names` encoded as UTF-8 (one type name per line). The first
 * call encodes it once; later calls return the same address.
 */
export function typeNames(names: string): usize {
  if (namesBuf == 0) {
    const len = String.UTF8.byteLength(names, false);
    namesBuf = heap.alloc(<usize>max(len, 1));
    String.UTF8.encodeUnsafe(changetype<usize>(names), names.length, namesBuf, false);
  }
  return namesBuf;
}

/** Length of `names` in UTF-8 bytes. */
export function typeNamesLength(names: string): i32 {
  return String.UTF8.byteLength(names, false);
}

export function psp_abi_version(): i32 {
  return ABI_VERSION;
}

export function psp_io_buffer(): usize {
  return IO;
}

export function psp_io_buffer_size(): i32 {
  return IO_SIZE;
}
