;; Hostile fixture: a table declaring 2^24 elements (128 MiB of host memory
;; per instance). Must be refused at load time.
;; Build: wat2wasm bigtable.wat -o bigtable.wasm
(module
  (memory (export "memory") 1)
  (table 0x1000000 funcref)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
