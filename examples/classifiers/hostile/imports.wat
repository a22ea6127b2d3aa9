;; Hostile: imports a host function (env.now). Only WASI is ever provided,
;; and only to Go modules: the host must refuse to load it.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm imports.wat -o imports.wasm
(module
  (import "env" "now" (func $now (result i64)))
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func (export "psp_classify") (result i32)
    (i32.wrap_i64 (i64.and (call $now) (i64.const 1))))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
