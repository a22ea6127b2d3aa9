;; Hostile: asks for 4 GiB of memory at once, then grows it one page at a
;; time until memory.grow fails, then touches the last byte it got and answers SHORT. The host's page limit
;; must make the growth fail early; the call itself succeeds.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm membomb.wat -o membomb.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func $bomb (result i32)
    (drop (memory.grow (i32.const 65535)))
    (block $full
      (loop $grow
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (br $grow)))
    (i32.store8 (i32.sub (i32.shl (memory.size) (i32.const 16)) (i32.const 1)) (i32.const 1))
    (i32.const 1))
  (func (export "psp_classify") (result i32) (call $bomb))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $i i32)
    (drop (call $bomb))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store (i32.add (i32.const 1024) (i32.shl (local.get $i) (i32.const 2))) (i32.const 1))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $n))
)
