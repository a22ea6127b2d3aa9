;; The classifier a fail-closed (or reloading) tenant runs while its module
;; cannot be fetched: every call answers a count or a type the host refuses,
;; so every request is dropped as a classifier fault.
;; Build: wat2wasm closed.wat -o closed.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 1))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (i32.add (local.get $n) (i32.const 1))))
