;; Hostile: answers types outside 0..N-1 (N = 3): 1000 for a single packet,
;; and 1000 / -1 alternately in a batch. The host must answer UNKNOWN.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm outofrange.wat -o outofrange.wasm
(module
  (memory (export "memory") 1)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 3))
  (func (export "psp_classify") (result i32) (i32.const 1000))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store (i32.add (i32.const 1024) (i32.shl (local.get $i) (i32.const 2)))
          (select (i32.const 1000) (i32.const -1) (i32.and (local.get $i) (i32.const 1))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $n))
)
