;; Hostile fixture: a memory whose minimum (65 pages, no maximum) is over
;; the default 64-page limit. Must be refused at load time.
;; Build: wat2wasm bigmin.wat -o bigmin.wasm
(module
  (memory (export "memory") 65)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
