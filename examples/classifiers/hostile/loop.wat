;; Hostile: loops forever on every call. The host must stop it (fuel) and
;; answer UNKNOWN; the process must not stall.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm loop.wat -o loop.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func $spin (result i32)
    (loop $forever (br $forever))
    (i32.const 1))
  (func (export "psp_classify") (result i32) (call $spin))
  (func (export "psp_classify_batch") (param i32) (result i32) (call $spin))
)
