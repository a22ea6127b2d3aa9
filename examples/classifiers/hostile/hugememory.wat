;; Hostile: declares a 16 MiB (256-page) minimum memory, over the host's
;; default limit of 64 pages. The host must refuse to load it.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm hugememory.wat -o hugememory.wasm
(module
  (memory (export "memory") 256)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
