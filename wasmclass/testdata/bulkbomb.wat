;; Hostile fixture: bulk memory instructions whose work is not proportional
;; to loop iterations. psp_classify runs memory.fill over 64 KiB 1000 times,
;; psp_classify_batch memory.copy of 64 KiB 1000 times
;; and the extra export table_fill
;; table.fill over 65536 elements 1000 times: 1000 loop iterations each, but
;; 64 MiB of memory (or 512 MiB of table) written. Fuel must charge them by
;; length.
;; Build: wat2wasm bulkbomb.wat -o bulkbomb.wasm
(module
  (memory (export "memory") 2 2)
  (table $t 65536 65536 funcref)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32)
    (local $i i32)
    (loop $again
      (memory.fill (i32.const 0) (i32.const 0) (i32.const 65536))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))
    (i32.const 1))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $i i32)
    (loop $again
      (memory.copy (i32.const 0) (i32.const 65536) (i32.const 65536))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))
    (local.get $n))
  (func (export "table_fill") (result i32)
    (local $i i32)
    (loop $again
      (table.fill $t (i32.const 0) (ref.null func) (i32.const 65536))
      (local.set $i (i32.add (local.get $i) (i32.const 1)))
      (br_if $again (i32.lt_u (local.get $i) (i32.const 1000))))
    (i32.const 1))
)
