"""RQ (python3-rq) against a Redis server: python3 - HOST PORT.

Enqueues jobs on two queues, one of which fails, runs a burst worker in
this process (SimpleWorker: no fork), and checks every job's status and
result as RQ reads them back (results in streams, registries in sorted
sets, the worker's pub/sub channel, its CLIENT LIST lookup). Prints "ok"
when every check passes; an assertion names the first that fails.
"""
import operator
import sys

from redis import Redis
from rq import Queue, SimpleWorker
from rq.job import Job


def main(host, port):
    r = Redis(host=host, port=int(port))
    r.flushdb()
    high, low = Queue("high", connection=r), Queue("low", connection=r)
    jobs = [high.enqueue(operator.add, i, i) for i in range(10)]
    jobs += [low.enqueue(operator.mul, i, 3) for i in range(5)]
    failing = low.enqueue(operator.truediv, 1, 0)
    assert len(high) == 10 and len(low) == 6, (len(high), len(low))
    w = SimpleWorker([high, low], connection=r)
    assert w.work(burst=True) is True
    for j in jobs:
        j = Job.fetch(j.id, connection=r)
        assert j.get_status() == "finished", (j.id, j.get_status())
    results = [Job.fetch(j.id, connection=r).latest_result().return_value for j in jobs]
    assert results == [2 * i for i in range(10)] + [3 * i for i in range(5)], results
    f = Job.fetch(failing.id, connection=r)
    assert f.get_status() == "failed", f.get_status()
    assert "ZeroDivisionError" in f.latest_result().exc_string
    assert len(high) == 0 and len(low) == 0
    assert high.finished_job_registry.count == 10 and low.failed_job_registry.count == 1
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
