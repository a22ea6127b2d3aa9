"""redis-py's pub/sub: PubSub.get_message, handlers run by run_in_thread,
PUBSUB's introspection, and a subscriber that closes.

Usage: python3 redispy_pubsub.py HOST PORT. Prints "ok" and exits 0 when
every check passes; an assertion names the first that fails.
"""
import sys
import threading
import time

import redis


def next_message(p, timeout=5):
    deadline = time.time() + timeout
    while time.time() < deadline:
        m = p.get_message(timeout=0.1)
        if m is not None:
            return m
    raise AssertionError("no message within %ss" % timeout)


def wait_until(what, ok, timeout=5):
    deadline = time.time() + timeout
    while not ok():
        assert time.time() < deadline, what
        time.sleep(0.01)


def main(host, port):
    r = redis.Redis(host=host, port=int(port), socket_timeout=10)
    r.flushall()

    p = r.pubsub()
    p.subscribe("ch1", "ch2")
    assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"ch1", "data": 1}
    assert next_message(p) == {"type": "subscribe", "pattern": None, "channel": b"ch2", "data": 2}
    p.psubscribe("ch*")
    assert next_message(p) == {"type": "psubscribe", "pattern": None, "channel": b"ch*", "data": 3}
    assert r.publish("ch1", "hello") == 2
    assert next_message(p) == {"type": "message", "pattern": None, "channel": b"ch1", "data": b"hello"}
    assert next_message(p) == {"type": "pmessage", "pattern": b"ch*", "channel": b"ch1", "data": b"hello"}
    assert r.publish("nobody", "x") == 0
    assert r.pubsub_numsub("ch1", "nochan") == [(b"ch1", 1), (b"nochan", 0)]
    assert r.pubsub_numpat() == 1
    assert sorted(r.pubsub_channels()) == [b"ch1", b"ch2"]
    assert r.pubsub_channels("*2") == [b"ch2"]
    # PING in the subscribed context is answered as a message is.
    p.ping("beat")
    m = next_message(p)
    assert m["type"] == "pong" and m["data"] == b"beat", m
    p.unsubscribe("ch1")
    assert next_message(p) == {"type": "unsubscribe", "pattern": None, "channel": b"ch1", "data": 2}
    p.punsubscribe()
    assert next_message(p) == {"type": "punsubscribe", "pattern": None, "channel": b"ch*", "data": 1}
    p.unsubscribe()
    assert next_message(p) == {"type": "unsubscribe", "pattern": None, "channel": b"ch2", "data": 0}
    assert p.get_message(timeout=0.2) is None
    p.close()

    # Handlers in a thread, as a job queue's worker listens.
    got = []
    done = threading.Event()

    def handler(m):
        got.append(m["data"])
        if len(got) == 100:
            done.set()

    p2 = r.pubsub(ignore_subscribe_messages=True)
    p2.subscribe(jobs=handler)
    p2.psubscribe(**{"other.*": handler})
    t = p2.run_in_thread(sleep_time=0.01)
    wait_until("subscribed", lambda: r.pubsub_numsub("jobs") == [(b"jobs", 1)] and r.pubsub_numpat() == 1)
    for i in range(50):
        assert r.publish("jobs", "j%d" % i) == 1
        assert r.publish("other.%d" % i, "o%d" % i) == 1
    assert done.wait(10), got
    assert got == [x for i in range(50) for x in (b"j%d" % i, b"o%d" % i)], got
    t.stop()
    t.join(5)
    p2.close()
    # A subscriber that closed receives nothing more.
    wait_until("the closed subscriber left", lambda: r.pubsub_numsub("jobs") == [(b"jobs", 0)] and r.pubsub_numpat() == 0)
    assert r.publish("jobs", "late") == 0
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
