;; Test fixture: type = first payload byte when it is below 4, else 0 (UNKNOWN).
;; It has no type names (the tests add a psp.types custom section to it).
;; Build: wat2wasm good.wat -o good.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 4))
  (func (export "psp_classify") (result i32) (call $one (i32.const 1152)))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store
          (i32.add (i32.const 1024) (i32.shl (local.get $i) (i32.const 2)))
          (call $one (i32.add (i32.const 1152) (i32.shl (local.get $i) (i32.const 8)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $n))
  (func $one (param $slot i32) (result i32)
    (local $t i32)
    (if (i32.eqz (i32.load (local.get $slot))) (then (return (i32.const 0))))
    (local.set $t (i32.load8_u offset=8 (local.get $slot)))
    (select (local.get $t) (i32.const 0) (i32.lt_u (local.get $t) (i32.const 4))))
)
