;; Hostile fixture: a table without a maximum that psp_classify grows by
;; 2^21 elements (16 MiB of host memory per instance; the 32-bit index space
;; allows 32 GiB). Returns 1 when table.grow fails (-1), 2 when it succeeds.
;; Build: wat2wasm tablebomb.wat -o tablebomb.wasm
(module
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func (export "psp_classify") (result i32)
    (select (i32.const 1) (i32.const 2)
      (i32.eq (table.grow $t (ref.null func) (i32.const 0x200000)) (i32.const -1))))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
