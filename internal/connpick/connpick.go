// Package connpick chooses the connection of a client's next request
// among a fixed set of in-order connections (TCP), as the load generator
// sends and as the simulator models it, so that a simulated run assigns
// requests the way the live run it predicts does.
//
// Two policies. Pool is what the connection pools of client libraries do
// (redis-py, go-redis, Jedis, libmemcached, pymemcache): a request goes on
// an idle connection, one with no request in flight, the most recently
// freed first (their pools hand idle connections out last in, first out);
// when none is idle it goes on the one with the fewest requests in flight
// (the lowest-numbered among equals), pipelined behind them, where a pool
// would open another connection or make its caller wait. RoundRobin sends
// request i on connection i mod n whatever is in flight there: a client
// that pipelines on every connection in turn.
//
// A Picker is not safe for concurrent use: the caller serialises Pick and
// Done. It allocates nothing after New.
package connpick

import (
	"fmt"
	"strings"
)

// Policy names a way to choose a connection.
type Policy string

// The policies.
const (
	Pool       Policy = "pool"
	RoundRobin Policy = "round-robin"
)

// Default is the policy when none is named.
const Default = Pool

// Policies lists the policies, default first.
var Policies = []Policy{Pool, RoundRobin}

// Parse returns the policy named s ("" is Default), or an error naming the
// policies.
func Parse(s string) (Policy, error) {
	if s == "" {
		return Default, nil
	}
	for _, p := range Policies {
		if string(p) == s {
			return p, nil
		}
	}
	names := make([]string, len(Policies))
	for i, p := range Policies {
		names[i] = string(p)
	}
	return "", fmt.Errorf("connection policy %q: unknown (want %s)", s, strings.Join(names, " or "))
}

// Picker assigns requests to n connections under a policy and tracks the
// requests in flight on each.
type Picker struct {
	policy   Policy
	inFlight []int32 // per connection: requests picked and not done
	next     int     // RoundRobin: the next connection

	// Pool: idle connections, the most recently freed last; and a
	// min-heap of every connection by (requests in flight, number),
	// pos[c] being connection c's place in it.
	idle []int32
	heap []int32
	pos  []int32
}

// New returns a picker over n > 0 connections, all idle, under policy p
// ("" is Default).
func New(p Policy, n int) (*Picker, error) {
	if n <= 0 {
		return nil, fmt.Errorf("connection picker: %d connections (want at least 1)", n)
	}
	p, err := Parse(string(p))
	if err != nil {
		return nil, fmt.Errorf("connection picker: %w", err)
	}
	k := &Picker{policy: p, inFlight: make([]int32, n)}
	if p == Pool {
		k.idle, k.heap, k.pos = make([]int32, n), make([]int32, n), make([]int32, n)
		for c := range n {
			k.idle[c] = int32(n - 1 - c) // connection 0 first
			k.heap[c], k.pos[c] = int32(c), int32(c)
		}
	}
	return k, nil
}

// Policy returns the picker's policy.
func (k *Picker) Policy() Policy { return k.policy }

// InFlight returns the requests in flight on connection c.
func (k *Picker) InFlight(c int) int { return int(k.inFlight[c]) }

// Pick returns the connection of the next request and counts it in
// flight there.
func (k *Picker) Pick() int {
	if k.policy == RoundRobin {
		c := k.next
		k.next = (k.next + 1) % len(k.inFlight)
		k.inFlight[c]++
		return c
	}
	var c int32
	if n := len(k.idle); n > 0 {
		c = k.idle[n-1]
		k.idle = k.idle[:n-1]
	} else {
		c = k.heap[0]
	}
	k.inFlight[c]++
	k.down(int(k.pos[c]))
	return int(c)
}

// Done counts one request of connection c answered (or given up on). A
// Done without a request in flight on c is ignored.
func (k *Picker) Done(c int) {
	if k.inFlight[c] == 0 {
		return
	}
	k.inFlight[c]--
	if k.policy == RoundRobin {
		return
	}
	k.up(int(k.pos[c]))
	if k.inFlight[c] == 0 {
		k.idle = append(k.idle, int32(c)) // within capacity: c was not idle
	}
}

// less orders the heap: fewer requests in flight first, then the lower
// connection number.
func (k *Picker) less(i, j int) bool {
	a, b := k.heap[i], k.heap[j]
	if k.inFlight[a] != k.inFlight[b] {
		return k.inFlight[a] < k.inFlight[b]
	}
	return a < b
}

func (k *Picker) swap(i, j int) {
	k.heap[i], k.heap[j] = k.heap[j], k.heap[i]
	k.pos[k.heap[i]], k.pos[k.heap[j]] = int32(i), int32(j)
}

func (k *Picker) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !k.less(i, p) {
			return
		}
		k.swap(i, p)
		i = p
	}
}

func (k *Picker) down(i int) {
	n := len(k.heap)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && k.less(r, l) {
			m = r
		}
		if !k.less(m, i) {
			return
		}
		k.swap(i, m)
		i = m
	}
}
