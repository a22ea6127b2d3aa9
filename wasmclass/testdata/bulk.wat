;; Test fixture for bulk memory: psp_classify copies a passive data segment
;; with memory.init (so the module has a data count section, which the fuel
;; instrumentation must keep) and returns its first byte (type 3).
;; Build: wat2wasm bulk.wat -o bulk.wasm
(module
  (memory (export "memory") 1)
  (data $three "\03")
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 4))
  (func (export "psp_classify") (result i32)
    (memory.init $three (i32.const 0) (i32.const 0) (i32.const 1))
    (i32.load8_u (i32.const 0)))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (memory.fill (i32.const 1024) (i32.const 0) (i32.shl (local.get $n) (i32.const 2)))
    (local.get $n))
)
