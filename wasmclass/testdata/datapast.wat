;; Hostile fixture: a data segment past the end of the memory it declares
;; (one page); instantiation traps, so Load must fail cleanly.
;; Build: wat2wasm datapast.wat -o datapast.wasm
(module
  (memory (export "memory") 1 1)
  (data (i32.const 65535) "xy")
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
