;; Invalid fixture: declares a 128-page (8 MiB) maximum memory, over the
;; default 64-page limit.
;; Build: wat2wasm bigmem.wat -o bigmem.wasm
(module
  (memory (export "memory") 1 128)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param i32) (result i32) (local.get 0))
)
