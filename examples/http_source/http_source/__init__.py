"""An exactly-once HTTP polling source for connect-runtime: the example of
docs/writing-a-connector.md.

* :mod:`http_source.connector`: the connector, which deals streams to tasks;
* :mod:`http_source.task`: the task, which reads them;
* :mod:`http_source.config`: their configuration keys;
* :mod:`http_source.server`: a tiny event feed to try it against.
"""

__version__ = "0.1.0"
