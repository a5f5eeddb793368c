"""A user's connector, written to a plugin directory for plugin.path tests.

``write_plugin(dir, package)`` writes package ``package`` (a connector, its task
and a helper module in a subpackage) into ``dir``. The connector's tasks number
their records per task: value ``{"task": t, "n": n, "module_file": ...}`` with
``n`` counting from 0 and the source offset ``{"n": next}`` per task, so
``connect-runtime verify --seq-field n --group-field task`` checks the output.
Task config: ``topic``, ``records.per.task`` (0: no end) and optionally
``poll.interval.ms`` (a pause before each batch of 50).
"""

from __future__ import annotations

import textwrap
from pathlib import Path


def write_plugin(plugin_dir: Path, package: str) -> None:
    """A user's connector package: connector, task and a helper module in a subpackage."""
    root = plugin_dir / package
    (root / "util").mkdir(parents=True)
    (root / "__init__.py").write_text('"""A connector shipped through plugin.path."""\n')
    (root / "util" / "__init__.py").write_text("")
    (root / "util" / "values.py").write_text(textwrap.dedent("""
        def value(task, n):
            # Where the executor imported this module from: inside the shipped zip.
            return {"task": task, "n": n, "module_file": __file__}
        """))
    (root / "source.py").write_text(textwrap.dedent(f"""
        import threading

        from connect_runtime import SourceConnector, SourceRecord, SourceTask
        from {package}.util.values import value


        class CountingTask(SourceTask):
            def version(self):
                return "7.7"

            def start(self, config):
                self.topic = config["topic"]
                self.task = int(config["task.id"])
                self.count = int(config["records.per.task"])  # 0: no end
                self.pause = int(config.get("poll.interval.ms", "0")) / 1000
                offset = self.context.offset_storage_reader.offset({{"task": self.task}})
                self.next = int(offset["n"]) if offset else 0
                self.stopping = threading.Event()

            def poll(self):
                if self.count and self.next >= self.count:
                    self.stopping.wait(0.1)
                    return None
                if self.pause and self.stopping.wait(self.pause):
                    return None
                batch = []
                while (not self.count or self.next < self.count) and len(batch) < 50:
                    batch.append(SourceRecord({{"task": self.task}}, {{"n": self.next + 1}},
                                              self.topic, key=str(self.task),
                                              value=value(self.task, self.next)))
                    self.next += 1
                return batch

            def stop(self):
                self.stopping.set()


        class UserCountingSourceConnector(SourceConnector):
            def version(self):
                return "7.7"

            def start(self, config):
                self.config = dict(config)

            def task_class(self):
                return CountingTask

            def task_configs(self, max_tasks):
                return [{{**self.config, "task.id": str(i)}} for i in range(max_tasks)]

            def stop(self):
                pass
        """))
