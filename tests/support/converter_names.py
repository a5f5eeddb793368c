"""The converter class names Kafka Connect lists, as the tests expect them listed.

``KEY_VALUE_CONVERTERS`` is the sorted list of key and value converters: the
config validation's recommended values for ``key.converter`` and the converter
registry's listing both answer it.
"""

from __future__ import annotations

KEY_VALUE_CONVERTERS: list[str] = [
    # Confluent's Schema Registry converters: key and value converters only.
    "io.confluent.connect.avro.AvroConverter",
    "io.confluent.connect.json.JsonSchemaConverter",
    "io.confluent.connect.protobuf.ProtobufConverter",
    "org.apache.kafka.connect.converters.BooleanConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "org.apache.kafka.connect.converters.DoubleConverter",
    "org.apache.kafka.connect.converters.FloatConverter",
    "org.apache.kafka.connect.converters.IntegerConverter",
    "org.apache.kafka.connect.converters.LongConverter",
    "org.apache.kafka.connect.converters.ShortConverter",
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter"]
