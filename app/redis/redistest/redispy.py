"""A short run of every command family psp serves, through redis-py.

Usage: python3 redispy.py HOST PORT. Prints "ok" and exits 0 when every
check passes; an assertion names the first that fails.
"""
import sys

import redis


def main(host, port):
    r = redis.Redis(host=host, port=int(port), socket_timeout=10)
    r.flushall()

    # Connection and server.
    assert r.ping() is True
    assert r.echo("hi") == b"hi"
    r.client_setname("redispy")
    assert r.client_getname() == "redispy"
    assert isinstance(r.client_id(), int)
    mine = [c for c in r.client_list() if c["id"] == str(r.client_id())]
    assert len(mine) == 1 and mine[0]["name"] == "redispy", mine
    info = r.info()
    assert info["redis_version"] and "used_memory" in info
    assert r.config_get("maxmemory-policy") == {"maxmemory-policy": "noeviction"}
    assert r.dbsize() == 0
    assert r.execute_command("SELECT", 0) in (True, b"OK")

    # Strings.
    assert r.set("s", "v") is True
    assert r.get("s") == b"v"
    assert r.set("s", "w", nx=True) is None
    assert r.set("s", "w", xx=True, get=True) == b"v"
    assert r.set("e", "1", ex=100) and 0 < r.ttl("e") <= 100
    assert r.set("p", "1", px=100000) and 0 < r.pttl("p") <= 100000
    assert r.set("e", "2", keepttl=True) and r.ttl("e") > 0
    assert r.mset({"a": "1", "b": "2"}) is True
    assert r.mget("a", "b", "nokey") == [b"1", b"2", None]
    assert r.msetnx({"a": "x", "c": "3"}) is False
    assert r.setnx("c", "3") is True
    assert r.setex("x", 100, "v") is True
    assert r.getset("x", "w") == b"v"
    assert r.getdel("x") == b"w" and r.get("x") is None
    assert r.getex("e", persist=True) == b"2" and r.ttl("e") == -1
    assert r.append("ap", "ab") == 2 and r.append("ap", "cd") == 4
    assert r.strlen("ap") == 4
    assert r.incr("n") == 1 and r.incrby("n", 9) == 10
    assert r.decr("n") == 9 and r.decrby("n", 4) == 5
    assert r.incrbyfloat("f", 10.5) == 10.5 and r.incrbyfloat("f", 0.1) == 10.6
    assert r.getrange("ap", 1, 2) == b"bc"
    assert r.setrange("ap", 1, "XY") == 4 and r.get("ap") == b"aXYd"
    binary = b"\r\n\x00\xff"
    r.set(binary, binary)
    assert r.get(binary) == binary

    # Keys.
    assert r.exists("a", "b", "nokey") == 2
    assert r.type("a") == b"string"
    assert r.expire("a", 100) is True and r.ttl("a") > 0
    assert r.persist("a") is True and r.ttl("a") == -1
    assert r.pexpire("a", 100000) is True
    assert r.expireat("b", 4102444800) is True
    assert r.rename("a", "a2") is True and r.exists("a") == 0
    assert r.renamenx("a2", "b") is False
    assert r.delete("a2", "nokey") == 1
    assert r.unlink("c") == 1
    assert r.randomkey() is not None
    assert set(r.keys("?")) >= {b"b", b"e", b"n", b"f", b"p", b"s"}
    for i in range(250):
        r.set("scan:%d" % i, i)
    assert len(set(r.scan_iter(match="scan:*", count=20))) == 250
    assert len(list(r.scan_iter(_type="string", count=1000))) >= 250

    # Lists.
    assert r.rpush("l", "a", "b", "c") == 3 and r.lpush("l", "z") == 4
    assert r.lrange("l", 0, -1) == [b"z", b"a", b"b", b"c"]
    assert r.llen("l") == 4 and r.lindex("l", 1) == b"a"
    assert r.lset("l", 0, "y") is True
    assert r.lpop("l") == b"y" and r.rpop("l") == b"c"
    assert r.rpush("l", "a", "a") == 4 and r.lrem("l", 0, "a") == 3
    assert r.ltrim("l", 0, 0) is True and r.lrange("l", 0, -1) == [b"b"]
    assert r.lpop("l", 5) == [b"b"] and r.exists("l") == 0

    # Hashes.
    assert r.hset("h", mapping={"f1": "v1", "f2": "v2"}) == 2
    assert r.hget("h", "f1") == b"v1"
    assert r.hmget("h", "f1", "no") == [b"v1", None]
    assert r.hgetall("h") == {b"f1": b"v1", b"f2": b"v2"}
    assert r.hkeys("h") == [b"f1", b"f2"] and r.hvals("h") == [b"v1", b"v2"]
    assert r.hlen("h") == 2 and r.hexists("h", "f2") is True
    assert r.hincrby("h", "n", 5) == 5
    assert dict(r.hscan_iter("h")) == {b"f1": b"v1", b"f2": b"v2", b"n": b"5"}
    assert r.hdel("h", "f1", "no") == 1

    # Sets.
    assert r.sadd("st", "a", "b", "c") == 3 and r.sadd("st", "a") == 0
    assert r.smembers("st") == {b"a", b"b", b"c"}
    assert r.sismember("st", "a") is True and r.scard("st") == 3
    assert r.srem("st", "a") == 1
    assert r.srandmember("st") in (b"b", b"c")
    assert set(r.sscan_iter("st")) == {b"b", b"c"}
    assert r.spop("st") in (b"b", b"c") and r.scard("st") == 1

    # Sorted sets.
    assert r.zadd("z", {"a": 1, "b": 2, "c": 3}) == 3
    assert r.zadd("z", {"a": 5}, xx=True, ch=True) == 1
    assert r.zscore("z", "a") == 5.0 and r.zcard("z") == 3
    assert r.zincrby("z", 2.5, "b") == 4.5
    assert r.zrank("z", "c") == 0 and r.zrevrank("z", "c") == 2
    assert r.zrange("z", 0, -1) == [b"c", b"b", b"a"]
    assert r.zrange("z", 0, -1, withscores=True) == [(b"c", 3.0), (b"b", 4.5), (b"a", 5.0)]
    assert r.zrange("z", 0, 1, desc=True) == [b"a", b"b"]
    assert r.zrangebyscore("z", 4, "+inf") == [b"b", b"a"]
    assert r.zrangebyscore("z", "-inf", "+inf", start=1, num=1) == [b"b"]
    assert r.zrevrangebyscore("z", 10, 4) == [b"a", b"b"]
    assert r.zcount("z", 4, 5) == 2
    assert dict(r.zscan_iter("z")) == {b"c": 3.0, b"b": 4.5, b"a": 5.0}
    assert r.zpopmin("z") == [(b"c", 3.0)] and r.zpopmax("z") == [(b"a", 5.0)]
    assert r.zrem("z", "b") == 1 and r.exists("z") == 0

    # Errors are raised for the command alone.
    r.set("str", "v")
    try:
        r.lpush("str", "x")
        raise AssertionError("WRONGTYPE not raised")
    except redis.ResponseError as e:
        assert str(e).startswith("WRONGTYPE")
    try:
        r.execute_command("NOSUCHCOMMAND")
        raise AssertionError("unknown command not raised")
    except redis.ResponseError as e:
        assert "unknown command" in str(e)

    # A pipeline (without MULTI) of commands that depend on each other.
    p = r.pipeline(transaction=False)
    p.set("pipe", 1).incr("pipe").incr("pipe").get("pipe")
    assert p.execute() == [True, 2, 3, b"3"]

    # redis-py's default pipeline is a transaction (MULTI ... EXEC).
    p = r.pipeline()
    p.set("tx", 1).incr("tx").lpush("txl", "a", "b").get("tx")
    assert p.execute() == [True, 2, 2, b"2"]
    # A command refused while queueing discards the transaction.
    p = r.pipeline()
    p.set("tx", 10).execute_command("SET", "tx")
    try:
        p.execute()
        raise AssertionError("EXECABORT not raised")
    except redis.ResponseError as e:
        assert "EXECABORT" in str(e) or "wrong number of arguments" in str(e), e
    assert r.get("tx") == b"2"
    # An error at run time is the command's own reply; the others run.
    p = r.pipeline()
    p.incr("tx").lpush("tx", "x").incr("tx")
    res = p.execute(raise_on_error=False)
    assert res[0] == 3 and isinstance(res[1], redis.ResponseError) and res[2] == 4, res

    # WATCH. redis-py's transaction() watches the keys, calls the function
    # (whose reads run at once) and runs what it queued after multi() in
    # MULTI ... EXEC, calling it again when EXEC finds a key modified.
    other = redis.Redis(host=host, port=int(port), socket_timeout=10)
    r.set("w", 1)
    calls = []

    def bump(pipe):
        calls.append(int(pipe.get("w")))
        if len(calls) == 1:
            other.set("w", 100)  # between the WATCH and the EXEC
        pipe.multi()
        pipe.set("w", calls[-1] + 1)

    assert r.transaction(bump, "w") == [True]
    assert calls == [1, 100] and r.get("w") == b"101", (calls, r.get("w"))
    # pipeline.watch(): WatchError when the key changed, none otherwise.
    with r.pipeline() as p:
        p.watch("w", "nokey")
        other.incr("w")
        other.delete("nokey")  # deletes nothing: no change
        p.multi()
        p.incr("w")
        try:
            p.execute()
            raise AssertionError("WatchError not raised")
        except redis.WatchError:
            pass
    assert r.get("w") == b"102"
    with r.pipeline() as p:
        p.watch("w", "nokey")
        other.delete("nokey")
        p.multi()
        p.incr("w")
        assert p.execute() == [103]
    with r.pipeline() as p:
        p.watch("w")
        other.incr("w")
        p.unwatch()
        p.multi()
        p.incr("w")
        assert p.execute() == [105]
    other.close()

    r.flushdb()
    assert r.dbsize() == 0
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
