;; Hostile: psp_classify takes an argument and psp_classify_batch returns
;; nothing. The host must refuse to load it, naming the export.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm badsignature.wat -o badsignature.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func (export "psp_classify") (param i32) (result i32) (local.get 0))
  (func (export "psp_classify_batch") (param i32))
)
