"""Converters that write through a Schema Registry, under Confluent's class names.

* :mod:`.avro`: ``io.confluent.connect.avro.AvroConverter``;
* :mod:`.config`: the registry keys they share (URLs, credentials, TLS, subject
  name strategies, registration);
* :mod:`.client`: the registry as the converters use it (one call per schema and
  subject, errors that name the subject and the URL);
* :mod:`.wire`: Confluent's framing (magic byte, schema id).

They are loaded only when a config names them: their libraries (confluent-kafka's
``schema_registry``, fastavro) stay out of every other task's process.
"""
