"""PySpark's daemon, with what every slot needs imported before it forks.

Spark starts one Python daemon per executor (``spark.python.daemon.module``,
which :mod:`connect_runtime.config.spark_settings` points here) and forks a
Python worker from it for each Spark task; a slot is such a worker, alive as
long as its tasks run. PySpark's own daemon imports ``pyspark`` and no more, so
each worker imported the runtime, confluent-kafka and PySpark's worker module
itself after the fork: about 22 MB of modules private to every process. Imported
here, before any fork, they are the daemon's pages, which its children share
until they write to them. ``gc.freeze()`` keeps the collector from writing to
them: it would otherwise touch every object's header on its next full pass in
each child, copying the pages one by one.

The imports must start no thread (a fork copies only the forking thread, so a
lock held by another thread would stay held in every child): none of these do;
``tests/task/test_daemon.py`` checks it.
"""

from __future__ import annotations

import gc

import confluent_kafka  # noqa: F401  (preloaded for the children; see above)
import pyspark.daemon
import pyspark.worker

import connect_runtime.task.slot  # noqa: F401

PRELOADED = ("pyspark.worker", "confluent_kafka", "connect_runtime.task.slot")


def main() -> None:
    gc.freeze()
    pyspark.daemon.manager()


if __name__ == "__main__":
    main()
