;; A psp request classifier in WebAssembly text (ABI v1, see sdk/ABI.md).
;;
;; Copy this file, change $classify (and the type names), then build:
;;
;;   wat2wasm classifier.wat -o classifier.wasm
;;   psp classifier check classifier.wasm
;;
;; As written it classifies the psp request header: the type is the u32 at
;; offset 4 of the payload, types 0..2 (UNKNOWN, SHORT, LONG).
(module
  ;; One page (64 KiB) is plenty: the I/O buffer takes 8320 bytes. The host
  ;; refuses memories over its page limit (default 64 pages).
  (memory (export "memory") 1)

  ;; ---- The I/O buffer --------------------------------------------------
  ;; At 1024 (8-byte aligned), 8320 bytes:
  ;;   1024            results: i32[32], one per slot, written by a batch
  ;;   1152 + 256*i    slot i: +0 u32 caplen, +4 u32 wirelen,
  ;;                           +8 the first caplen payload bytes (<= 248)
  ;; Read only caplen bytes of a slot: the rest may hold an older packet.
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))

  ;; ---- Types -----------------------------------------------------------
  ;; N: $classify returns 0..N-1; 0 is UNKNOWN. Anything else is counted as
  ;; a fault by the host and the packet goes to UNKNOWN.
  (func (export "psp_num_types") (result i32) (i32.const 3))

  ;; Optional names, UTF-8, one per line (line i names type i; an empty line
  ;; leaves a type unnamed): an address in memory and a length in bytes.
  (data (i32.const 16) "UNKNOWN\nSHORT\nLONG")
  (func (export "psp_type_names") (result i32) (i32.const 16))
  (func (export "psp_type_names_len") (result i32) (i32.const 18))

  ;; ---- The classifier: write this --------------------------------------
  ;; $slot is the address of a slot; return the packet's type.
  (func $classify (param $slot i32) (result i32)
    (local $caplen i32) (local $t i32)
    (local.set $caplen (i32.load (local.get $slot)))
    ;; Too short for the 16-byte header: UNKNOWN.
    (if (i32.lt_u (local.get $caplen) (i32.const 16))
      (then (return (i32.const 0))))
    ;; The type field: payload offset 4 = slot offset 8 + 4.
    (local.set $t (i32.load offset=12 (local.get $slot)))
    (select (local.get $t) (i32.const 0)
      (i32.lt_u (local.get $t) (i32.const 3))))

  ;; ---- Glue: leave as is -------------------------------------------------
  ;; One packet, in slot 0.
  (func (export "psp_classify") (result i32)
    (call $classify (i32.const 1152)))

  ;; Slots 0..n-1 into results[0..n-1]; returns n (0 if n is out of range,
  ;; which the host reports as a fault).
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (local $i i32)
    (if (i32.gt_u (local.get $n) (i32.const 32))
      (then (return (i32.const 0))))
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store
          (i32.add (i32.const 1024) (i32.shl (local.get $i) (i32.const 2)))
          (call $classify
            (i32.add (i32.const 1152) (i32.shl (local.get $i) (i32.const 8)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next)))
    (local.get $n))
)
