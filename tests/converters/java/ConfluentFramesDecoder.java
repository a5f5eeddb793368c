import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.apicurio.registry.serde.avro.AvroKafkaDeserializer;
import io.apicurio.registry.utils.converter.AvroConverter;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.math.BigDecimal;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Collection;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import org.apache.avro.generic.GenericFixed;
import org.apache.avro.generic.GenericRecord;
import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Field;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaAndValue;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;

/**
 * Decodes Confluent-framed Avro (magic 0, 4-byte schema id, Avro binary) with
 * Apicurio Registry's own Java code, for tests/converters/test_registry_java_decoder.py.
 *
 * <pre>java -cp CLASSES:LIBS/* ConfluentFramesDecoder http://HOST:PORT/apis/registry/v2</pre>
 *
 * The argument is the registry's CORE API (not /apis/ccompat/v7). Each stdin line is
 * {@code topic TAB hex-of-frame [TAB key|value]} (value when left out). Each frame is
 * decoded twice: by Apicurio's Kafka Connect converter
 * ({@code io.apicurio.registry.utils.converter.AvroConverter#toConnectData}) and by
 * Apicurio's plain Avro deserializer ({@code AvroKafkaDeserializer}), both configured
 * with {@code as-confluent=true} (4-byte id) and {@code use-id=contentId} (the id
 * Apicurio's Confluent API hands out is the content id). One JSON line per frame:
 *
 * <pre>
 * {"connect": {"class": "Struct", "schema": SCHEMA, "value": VALUE, "classes": {"path": "JavaClass", ...}},
 *  "avro": {"class": "Record", "schema": WRITER-SCHEMA-JSON, "value": VALUE}}
 * </pre>
 *
 * (either side may be {"error": "stack trace"} instead). SCHEMA is a Connect schema:
 * {"type", "optional", "name", "version", "doc", "parameters", "default", "fields":
 * [{"name", "index", "schema"}], "keySchema", "valueSchema"}, absent keys being null.
 * VALUE renders: Struct and GenericRecord as an object in field order; byte[] and
 * ByteBuffer and Avro fixed as lowercase hex; BigDecimal (Connect Decimal) as its
 * plain string; a Connect Date as epoch days, Time as millis of the day, Timestamp as
 * epoch millis (all java.util.Date); a float as the double of the same value (exact);
 * maps with string keys as objects, others as [[key, value], ...]. "class" is the
 * simple name of the decoded object's Java class and "classes" maps every Connect
 * struct field path (a.b) to that of its value, so the caller can tell Short from
 * Integer or Float from Double. The Avro side has no logical-type conversions
 * (Apicurio's deserializer uses plain GenericData): a decimal is its unscaled
 * two's-complement bytes, a date an int, a timestamp-millis a long; its schema (only
 * for a record) is the writer schema the deserializer fetched, as JSON.
 */
public class ConfluentFramesDecoder {
  private static final JsonNodeFactory NODES = JsonNodeFactory.instance;
  private static final ObjectMapper MAPPER = new ObjectMapper();

  public static void main(String[] args) throws Exception {
    Map<String, Object> conf = new HashMap<>();
    conf.put("apicurio.registry.url", args[0]);
    conf.put("apicurio.registry.as-confluent", "true");
    conf.put("apicurio.registry.use-id", "contentId");
    conf.put("apicurio.registry.headers.enabled", "false");
    AvroConverter<Object> valueConverter = new AvroConverter<>();
    valueConverter.configure(conf, false);
    AvroConverter<Object> keyConverter = new AvroConverter<>();
    keyConverter.configure(conf, true);
    AvroKafkaDeserializer<Object> valueDeserializer = new AvroKafkaDeserializer<>();
    valueDeserializer.configure(conf, false);
    AvroKafkaDeserializer<Object> keyDeserializer = new AvroKafkaDeserializer<>();
    keyDeserializer.configure(conf, true);

    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      String[] parts = line.split("\t");
      String topic = parts[0];
      byte[] frame = HexFormat.of().parseHex(parts[1]);
      boolean isKey = parts.length > 2 && parts[2].equals("key");
      ObjectNode result = NODES.objectNode();
      result.set("connect", connectSide(isKey ? keyConverter : valueConverter, topic, frame));
      result.set("avro", avroSide(isKey ? keyDeserializer : valueDeserializer, topic, frame));
      out.println(MAPPER.writeValueAsString(result));
    }
    valueDeserializer.close();
    keyDeserializer.close();
  }

  private static ObjectNode connectSide(AvroConverter<Object> converter, String topic, byte[] frame) {
    ObjectNode side = NODES.objectNode();
    try {
      SchemaAndValue sv = converter.toConnectData(topic, frame);
      side.put("class", sv.value() == null ? null : sv.value().getClass().getSimpleName());
      side.set("schema", schema(sv.schema()));
      ObjectNode classes = NODES.objectNode();
      side.set("value", connectValue(sv.schema(), sv.value(), "", classes));
      side.set("classes", classes);
    } catch (Exception e) {
      side.put("error", stackTrace(e));
    }
    return side;
  }

  private static ObjectNode avroSide(AvroKafkaDeserializer<Object> deserializer, String topic, byte[] frame) {
    ObjectNode side = NODES.objectNode();
    try {
      Object value = deserializer.deserialize(topic, frame);
      side.put("class", value == null ? null : value.getClass().getSimpleName());
      if (value instanceof GenericRecord) {
        side.set("schema", MAPPER.readTree(((GenericRecord) value).getSchema().toString()));
      }
      side.set("value", avroValue(value));
    } catch (Exception e) {
      side.put("error", stackTrace(e));
    }
    return side;
  }

  static JsonNode schema(Schema s) {
    if (s == null) {
      return NODES.nullNode();
    }
    ObjectNode node = NODES.objectNode();
    node.put("type", s.type().name());
    node.put("optional", s.isOptional());
    node.put("name", s.name());
    node.put("version", s.version());
    node.put("doc", s.doc());
    if (s.parameters() == null) {
      node.putNull("parameters");
    } else {
      ObjectNode params = node.putObject("parameters");
      s.parameters().forEach(params::put);
    }
    node.set("default", s.defaultValue() == null ? NODES.nullNode()
        : connectValue(s, s.defaultValue(), "", NODES.objectNode()));
    switch (s.type()) {
      case STRUCT:
        ArrayNode fields = node.putArray("fields");
        for (Field f : s.fields()) {
          ObjectNode fn = fields.addObject();
          fn.put("name", f.name());
          fn.put("index", f.index());
          fn.set("schema", schema(f.schema()));
        }
        break;
      case ARRAY:
        node.set("valueSchema", schema(s.valueSchema()));
        break;
      case MAP:
        node.set("keySchema", schema(s.keySchema()));
        node.set("valueSchema", schema(s.valueSchema()));
        break;
      default:
        break;
    }
    return node;
  }

  static JsonNode connectValue(Schema s, Object v, String path, ObjectNode classes) {
    if (!path.isEmpty()) {
      classes.put(path, v == null ? null : v.getClass().getSimpleName());
    }
    if (v == null) {
      return NODES.nullNode();
    }
    String name = s == null ? null : s.name();
    if (Decimal.LOGICAL_NAME.equals(name) || v instanceof BigDecimal) {
      return NODES.textNode(((BigDecimal) v).toPlainString());
    }
    if (v instanceof java.util.Date) {
      long millis = ((java.util.Date) v).getTime();
      if (Date.LOGICAL_NAME.equals(name)) {
        return NODES.numberNode(Math.floorDiv(millis, 86_400_000L));
      }
      if (Time.LOGICAL_NAME.equals(name) || Timestamp.LOGICAL_NAME.equals(name)) {
        return NODES.numberNode(millis);
      }
      return NODES.textNode(((java.util.Date) v).toInstant().toString());
    }
    if (v instanceof Struct) {
      Struct struct = (Struct) v;
      ObjectNode node = NODES.objectNode();
      for (Field f : struct.schema().fields()) {
        String sub = path.isEmpty() ? f.name() : path + "." + f.name();
        node.set(f.name(), connectValue(f.schema(), struct.get(f), sub, classes));
      }
      return node;
    }
    if (v instanceof List) {
      ArrayNode node = NODES.arrayNode();
      for (Object item : (List<?>) v) {
        node.add(connectValue(s == null ? null : s.valueSchema(), item, "", classes));
      }
      return node;
    }
    if (v instanceof Map) {
      return map((Map<?, ?>) v, (k) -> connectValue(s == null ? null : s.keySchema(), k, "", classes),
          (x) -> connectValue(s == null ? null : s.valueSchema(), x, "", classes));
    }
    return scalar(v);
  }

  static JsonNode avroValue(Object v) {
    if (v == null) {
      return NODES.nullNode();
    }
    if (v instanceof GenericRecord) {
      GenericRecord record = (GenericRecord) v;
      ObjectNode node = NODES.objectNode();
      for (org.apache.avro.Schema.Field f : record.getSchema().getFields()) {
        node.set(f.name(), avroValue(record.get(f.pos())));
      }
      return node;
    }
    if (v instanceof GenericFixed) {
      return NODES.textNode(HexFormat.of().formatHex(((GenericFixed) v).bytes()));
    }
    if (v instanceof BigDecimal) {  // only if a logical-type conversion ran
      return NODES.textNode(((BigDecimal) v).toPlainString());
    }
    if (v instanceof Collection) {
      ArrayNode node = NODES.arrayNode();
      for (Object item : (Collection<?>) v) {
        node.add(avroValue(item));
      }
      return node;
    }
    if (v instanceof Map) {
      return map((Map<?, ?>) v, ConfluentFramesDecoder::avroValue, ConfluentFramesDecoder::avroValue);
    }
    if (v instanceof java.time.temporal.TemporalAccessor) {  // only if a logical-type conversion ran
      return NODES.textNode(v.toString());
    }
    return scalar(v);  // Avro's Utf8 is a CharSequence
  }

  private static JsonNode map(Map<?, ?> m, java.util.function.Function<Object, JsonNode> key,
                              java.util.function.Function<Object, JsonNode> value) {
    boolean textKeys = m.keySet().stream().allMatch((k) -> k instanceof CharSequence);
    if (textKeys) {
      ObjectNode node = NODES.objectNode();
      m.forEach((k, x) -> node.set(k.toString(), value.apply(x)));
      return node;
    }
    ArrayNode node = NODES.arrayNode();
    m.forEach((k, x) -> node.addArray().add(key.apply(k)).add(value.apply(x)));
    return node;
  }

  private static JsonNode scalar(Object v) {
    if (v instanceof byte[]) {
      return NODES.textNode(HexFormat.of().formatHex((byte[]) v));
    }
    if (v instanceof ByteBuffer) {
      ByteBuffer b = ((ByteBuffer) v).duplicate();
      byte[] bytes = new byte[b.remaining()];
      b.get(bytes);
      return NODES.textNode(HexFormat.of().formatHex(bytes));
    }
    if (v instanceof Boolean) {
      return NODES.booleanNode((Boolean) v);
    }
    if (v instanceof Float) {
      return NODES.numberNode(((Float) v).doubleValue());
    }
    if (v instanceof Double) {
      return NODES.numberNode((Double) v);
    }
    if (v instanceof Byte || v instanceof Short || v instanceof Integer || v instanceof Long) {
      return NODES.numberNode(((Number) v).longValue());
    }
    if (v instanceof CharSequence) {
      return NODES.textNode(v.toString());
    }
    // Anything else (an Avro enum symbol, a Connect union/enum helper): its text.
    return NODES.textNode(v.getClass().getName() + ":" + v);
  }

  private static String stackTrace(Exception e) {
    StringWriter text = new StringWriter();
    e.printStackTrace(new PrintWriter(text));
    return text.toString();
  }
}
