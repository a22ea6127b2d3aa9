;; Hostile fixture: WASI functions whose work grows with an argument, called
;; from short loops. psp_classify fills 64 KiB with random_get 1000 times;
;; psp_classify_batch calls fd_write with 8192 (empty) iovecs 1000 times;
;; poll calls poll_oneoff with 1000 subscriptions 1000 times. 1000 loop
;; iterations each: fuel must charge the calls by their arguments.
;; Build: wat2wasm wasibomb.wat -o wasibomb.wasm
(module
  (import "wasi_snapshot_preview1" "random_get" (func $random (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "poll_oneoff" (func $poll (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2 2)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32)
    (local $i i32)
    (loop $again
      (drop (call $random (i32.const 65536) (i32.const 65536)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))
    (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $i i32)
    (loop $again
      (drop (call $write (i32.const 1) (i32.const 65536) (i32.const 8192) (i32.const 16)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))
    (local.get $n))
  (func (export "poll") (result i32)
    (local $i i32)
    (loop $again
      (drop (call $poll (i32.const 65536) (i32.const 16384) (i32.const 1000) (i32.const 16)))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))
    (i32.const 1))
)
