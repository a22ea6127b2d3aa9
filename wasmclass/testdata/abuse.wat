;; Test fixture for ABI abuse: the constants the host reads come from the
;; globals below, in this order, which the tests rewrite (global i = value
;; i) to try values the ABI forbids: an I/O buffer outside the memory or
;; misaligned, a huge or negative size, 0 or too many types, type names
;; outside the memory, a batch count other than n. As written it is valid:
;; every packet is type 1.
;; Build: wat2wasm abuse.wat -o abuse.wasm
(module
  (memory (export "memory") 1)
  (global $buf i32 (i32.const 1024))
  (global $size i32 (i32.const 8320))
  (global $types i32 (i32.const 2))
  (global $names i32 (i32.const 16))
  (global $nameslen i32 (i32.const 12))
  (global $count i32 (i32.const -1)) ;; -1: return n
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (global.get $buf))
  (func (export "psp_io_buffer_size") (result i32) (global.get $size))
  (func (export "psp_num_types") (result i32) (global.get $types))
  (func (export "psp_type_names") (result i32) (global.get $names))
  (func (export "psp_type_names_len") (result i32) (global.get $nameslen))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (memory.fill (global.get $buf) (i32.const 0) (i32.shl (local.get $n) (i32.const 2)))
    (i32.store8 (global.get $buf) (i32.const 1))
    (select (local.get $n) (global.get $count) (i32.eq (global.get $count) (i32.const -1))))
  (data (i32.const 16) "UNKNOWN\none\n")
)
