;; Hostile fixture: _initialize recurses forever through a table; Load must
;; fail after the initialisation budget.
;; Build: wat2wasm initloop.wat -o initloop.wasm
(module
  (memory (export "memory") 1)
  (type $v (func))
  (table 1 1 funcref)
  (elem (i32.const 0) $init)
  (func $init (export "_initialize") (call_indirect (type $v) (i32.const 0)))
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32) (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32) (local.get $n))
)
