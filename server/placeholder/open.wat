;; The classifier a fail-open tenant runs while its module cannot be
;; fetched: every request is UNKNOWN (the results area is never written, so
;; it holds zeros).
;; Build: wat2wasm open.wat -o open.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 1))
  (func (export "psp_classify") (result i32) (i32.const 0))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n)))
