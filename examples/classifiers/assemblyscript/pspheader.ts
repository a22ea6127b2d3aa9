// The psp request header classifier: the type is the u32 (little-endian) at
// offset 4 of the 16-byte header (see wire/wire.go).
//
// Build (`make classifiers` from the repository root, or from this directory
// after `npm ci` in sdk/assemblyscript):
// ../../../sdk/assemblyscript/node_modules/.bin/asc pspheader.ts --runtime stub -O3 --noAssert --converge --use abort= -o pspheader.wasm
import { Packet, classifyBatch, classifyOne, typeNames, typeNamesLength }
  from "../../../sdk/assemblyscript/assembly";
export { psp_abi_version, psp_io_buffer, psp_io_buffer_size }
  from "../../../sdk/assemblyscript/assembly";

const NUM_TYPES: u32 = 12;
const NAMES = "UNKNOWN\nSHORT\nLONG\n\n\nNewOrder\nPayment\nDelivery\nOrderStatus\nStockLevel\nGET\nSCAN";

function classify(p: Packet): u32 {
  if (p.caplen < 16) return 0;
  const t = p.u32le(4);
  return t < NUM_TYPES ? t : 0;
}

export function psp_num_types(): i32 { return NUM_TYPES; }
export function psp_type_names(): usize { return typeNames(NAMES); }
export function psp_type_names_len(): i32 { return typeNamesLength(NAMES); }
export function psp_classify(): i32 { return classifyOne(classify); }
export function psp_classify_batch(n: i32): i32 { return classifyBatch(n, classify); }
