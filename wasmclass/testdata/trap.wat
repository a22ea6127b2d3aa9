;; Hostile fixture: traps (unreachable) on every packet.
;; Build: wat2wasm trap.wat -o trap.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
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
  (func $one (param $slot i32) (result i32) (unreachable))
)
