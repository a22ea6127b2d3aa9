# pymemcache (Debian's python3-pymemcache) against a memcached server over TCP:
# /usr/bin/python3 - HOST PORT < pymemcache.py prints "ok: N checks", or each
# failed check and exits 1. Every check holds for memcached 1.6.18.
import sys
from pymemcache.client.base import Client

host, port = sys.argv[1], sys.argv[2]
c = Client((host, int(port)), connect_timeout=5, timeout=5)
failed = []
checks = 0


def check(name, got, want):
    global checks
    checks += 1
    if got != want:
        failed.append(f"{name}: got {got!r}, want {want!r}")


check("set", c.set("a", b"1", noreply=False), True)
check("get", c.get("a"), b"1")
check("get missing", c.get("nope"), None)
check("set b", c.set("b", b"two", noreply=False), True)
check("get_many", c.get_many(["a", "b", "nope"]), {"a": b"1", "b": b"two"})
check("incr", c.incr("a", 5), 6)
check("decr", c.decr("a", 2), 4)
check("incr missing", c.incr("nope", 1), None)
v, token = c.gets("b")
check("gets", v, b"two")
check("cas", c.cas("b", b"three", token), True)
check("cas stale", c.cas("b", b"four", token), False)
check("cas missing", c.cas("nope", b"x", b"1"), None)
check("get after cas", c.get("b"), b"three")
check("touch", c.touch("b", 100, noreply=False), True)
check("touch missing", c.touch("nope", 100, noreply=False), False)
check("delete", c.delete("a", noreply=False), True)
check("delete missing", c.delete("a", noreply=False), False)
check("get deleted", c.get("a"), None)
c.set("n", b"x")  # noreply, pymemcache's default
check("get after a noreply set", c.get("n"), b"x")
check("add existing", c.add("b", b"x", noreply=False), False)
check("append", c.append("b", b"!", noreply=False), True)
check("prepend", c.prepend("b", b"<", noreply=False), True)
check("get appended", c.get("b"), b"<three!")
big = bytes(range(256)) * 2000
check("set 512000 bytes", c.set("big", big, noreply=False), True)
check("get 512000 bytes", c.get("big"), big)
many = {f"m{i}": str(i).encode() for i in range(200)}
check("set_many", c.set_many(many, noreply=False), [])
check("get_many of 200", c.get_many(list(many)), many)
check("version", c.version()[:1].isdigit(), True)
check("stats cmd_get", c.stats()[b"cmd_get"] > 0, True)
c.quit()
c.close()
if failed:
    print("\n".join(failed))
    sys.exit(1)
print(f"ok: {checks} checks")
