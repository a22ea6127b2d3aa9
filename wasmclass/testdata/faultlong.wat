;; The psp-header classifier, except that a call holding a LONG request
;; (type 2) traps: a module that faults on some requests only.
;; wat2wasm faultlong.wat -o faultlong.wasm
(module
  (memory (export "memory") 1)

  ;; I/O buffer at 1024: results i32[32] at 1024, slots from 1152, 256 bytes each.
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 12))

  ;; type of the slot at $slot: 0 if caplen < 16 or the type is >= 12.
  (func $type (param $slot i32) (result i32)
    (local $t i32)
    (select
      (select
        (local.tee $t (i32.load offset=12 (local.get $slot)))
        (i32.const 0)
        (i32.lt_u (local.get $t) (i32.const 12)))
      (i32.const 0)
      (i32.ge_u (i32.load (local.get $slot)) (i32.const 16))))

  (func (export "psp_classify") (result i32)
    (local $t i32)
    (local.set $t (call $type (i32.const 1152)))
    (if (i32.eq (local.get $t) (i32.const 2)) (then (unreachable)))
    (local.get $t))

  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $slot i32) (local $res i32) (local $end i32) (local $t i32)
    (if (i32.gt_u (local.get $n) (i32.const 32)) (then (return (i32.const 0))))
    (local.set $res (i32.const 1024))
    (local.set $slot (i32.const 1152))
    (local.set $end (i32.add (i32.const 1024) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (br_if $done (i32.eqz (local.get $n)))
      (loop $next
        (local.set $t (call $type (local.get $slot)))
        (if (i32.eq (local.get $t) (i32.const 2)) (then (unreachable)))
        (i32.store (local.get $res) (local.get $t))
        (local.set $slot (i32.add (local.get $slot) (i32.const 256)))
        (br_if $next (i32.ne
          (local.tee $res (i32.add (local.get $res) (i32.const 4)))
          (local.get $end)))))
    (local.get $n))

  (func (export "psp_type_names") (result i32) (i32.const 16))
  (func (export "psp_type_names_len") (result i32) (i32.const 78))
  (data (i32.const 16)
    "UNKNOWN\nSHORT\nLONG\n\n\nNewOrder\nPayment\nDelivery\nOrderStatus\nStockLevel\nGET\nSCAN"))
