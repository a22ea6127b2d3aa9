;; A bad release of pspheader.wat, for rollout tests and demos: it types
;; every request LONG (type 2), whatever its header says. It never faults
;; and classifies nothing UNKNOWN: only the type mix shows it.
;;
;; Build (`make classifiers` from the repository root, or from this directory):
;; wat2wasm pspheader_alllong.wat -o pspheader_alllong.wasm
(module
  (memory (export "memory") 1)

  ;; I/O buffer at 1024: results i32[32] at 1024, slots from 1152, 256 bytes each.
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 12))

  (func (export "psp_classify") (result i32) (i32.const 2))

  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $res i32) (local $end i32)
    (if (i32.gt_u (local.get $n) (i32.const 32)) (then (return (i32.const 0))))
    (local.set $res (i32.const 1024))
    (local.set $end (i32.add (i32.const 1024) (i32.shl (local.get $n) (i32.const 2))))
    (block $done
      (br_if $done (i32.eqz (local.get $n)))
      (loop $next
        (i32.store (local.get $res) (i32.const 2))
        (br_if $next (i32.ne
          (local.tee $res (i32.add (local.get $res) (i32.const 4)))
          (local.get $end)))))
    (local.get $n))

  (func (export "psp_type_names") (result i32) (i32.const 16))
  (func (export "psp_type_names_len") (result i32) (i32.const 78))
  (data (i32.const 16)
    "UNKNOWN\nSHORT\nLONG\n\n\nNewOrder\nPayment\nDelivery\nOrderStatus\nStockLevel\nGET\nSCAN"))
