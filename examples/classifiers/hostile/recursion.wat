;; Hostile: unbounded recursion on every call (a stack overflow, or fuel
;; running out first). The host must contain it and answer UNKNOWN.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm recursion.wat -o recursion.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func $down (param $depth i32) (result i32)
    (i32.add (call $down (i32.add (local.get $depth) (i32.const 1))) (i32.const 1)))
  (func (export "psp_classify") (result i32) (call $down (i32.const 0)))
  (func (export "psp_classify_batch") (param i32) (result i32) (call $down (i32.const 0)))
)
