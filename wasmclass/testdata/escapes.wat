;; Hostile fixture: control flow that tries to avoid the fuel checks.
;; psp_classify: unbounded recursion through call_indirect and a table.
;; psp_classify_batch: an infinite loop whose only back edge is a br_table.
;; mutual: $ping and $pong call each other forever; $pong has a loop that
;; exits at once (a loop entered without branching back).
;; nested: three nested loops, the inner ones branching to the outer ones.
;; Build: wat2wasm escapes.wat -o escapes.wasm
(module
  (memory (export "memory") 1)
  (type $v (func))
  (table 2 2 funcref)
  (elem (i32.const 0) $self $ping)
  (func (export "psp_abi_version") (result i32) (i32.const 1))
  (func (export "psp_io_buffer") (result i32) (i32.const 1024))
  (func (export "psp_io_buffer_size") (result i32) (i32.const 8320))
  (func (export "psp_num_types") (result i32) (i32.const 2))
  (func (export "psp_classify") (result i32) (call_indirect (type $v) (i32.const 0)) (i32.const 1))
  (func $self (call_indirect (type $v) (i32.const 0)))
  (func (export "psp_classify_batch") (param $n i32) (result i32)
    (block $out
      (loop $top
        (block $a
          (block $b
            (br_table $a $b $top (i32.and (local.get $n) (i32.const 3))))
          (local.set $n (i32.add (local.get $n) (i32.const 1)))
          (br_table $top $out (i32.const 0)))
        (local.set $n (i32.add (local.get $n) (i32.const 1)))
        (br_table $top $top $out (i32.const 1))))
    (local.get $n))
  (func $ping (export "mutual") (call $pong))
  (func $pong (loop $once) (call $ping))
  (func (export "nested") (result i32)
    (local $i i32)
    (loop $outer
      (loop $middle
        (loop $inner
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br_if $middle (i32.and (local.get $i) (i32.const 1)))
          (br $outer))))
    (i32.const 1))
)
