;; Hostile fixture: puts the WASI random_get in a table and calls it with
;; call_indirect, where a charge at the call site cannot see which function
;; runs. Must be refused at load time.
;; Build: wat2wasm wasiref.wat -o wasiref.wasm
(module
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (type $rg (func (param i32 i32) (result i32)))
  (table 1 1 funcref)
  (elem (i32.const 0) $random)
  (memory (export "memory") 2 2)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32)
    (drop (call_indirect (type $rg) (i32.const 65536) (i32.const 65536) (i32.const 0)))
    (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
