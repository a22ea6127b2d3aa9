;; Hostile: traps (unreachable) on every packet.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm trap.wat -o trap.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func (export "psp_classify") (result i32) (unreachable))
  (func (export "psp_classify_batch") (param i32) (result i32) (unreachable))
)
