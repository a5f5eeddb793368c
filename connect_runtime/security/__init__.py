"""Transport security and secrets: what reads stores, credentials and secrets, and builds TLS.

What it owns, module by module:

* :mod:`~connect_runtime.security.tls`: the REST listener's and its clients'
  TLS (key and trust stores read, SSL contexts built; ``ClientTls``, the
  picklable client side a task spec carries);
* :mod:`~connect_runtime.security.kafka_clients`: Kafka clients' TLS and SASL
  keys in librdkafka's names (Java store types, ``sasl.jaas.config``), and the
  check that librdkafka accepts a client config;
* :mod:`~connect_runtime.security.rest_auth`: REST Basic authentication (the
  JAAS file and the credentials file it names);
* :mod:`~connect_runtime.security.providers`: config providers, resolving
  ``${provider:[path:]key}`` into secrets;
* :mod:`~connect_runtime.security.redaction`: keeping those secrets out of
  traces, validate answers and log lines.

Both planes import it: the worker (control plane: ``config/`` calls it when the
worker config loads, the herder and REST use what it built) and the Spark tasks
(data plane: a slot resolves its task's secrets, scrubs its traces and opens
TLS connections to its worker). So it must never import ``cluster/``, ``task/``,
``rest/`` or ``config/``; ``tests/test_architecture.py`` places it below all of
them. ``config/`` keeps what only parses and validates (key definitions,
defaults) and calls in here for every step that reads a store, a credentials
file or a secret.
"""
