/*
 * Test vectors from Kafka Connect's own converters (run by generate_vectors.py).
 *
 *   java -cp <this dir>:<kafka-connect libs>/* ConverterVectors requests.json answers.json
 *
 * Each request names a converter class, its config, a schema in Connect's JSON
 * schema form (or null) and a value in the interchange form described in
 * tests/converters/vector_interchange.py; the answer is the bytes the converter wrote
 * (base64) or the exception it threw. Maps are LinkedHashMaps, so a map's entries
 * keep the order the case gives them, as a Python dict does.
 */

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import org.apache.kafka.connect.data.Date;
import org.apache.kafka.connect.data.Decimal;
import org.apache.kafka.connect.data.Schema;
import org.apache.kafka.connect.data.SchemaBuilder;
import org.apache.kafka.connect.data.Struct;
import org.apache.kafka.connect.data.Time;
import org.apache.kafka.connect.data.Timestamp;
import org.apache.kafka.connect.storage.Converter;
import org.apache.kafka.connect.storage.HeaderConverter;

import java.io.File;
import java.math.BigDecimal;
import java.time.Instant;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.Base64;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class ConverterVectors {
    private static final ObjectMapper MAPPER = new ObjectMapper();
    private static final long MILLIS_PER_DAY = 24L * 60 * 60 * 1000;

    public static void main(String[] args) throws Exception {
        JsonNode requests = MAPPER.readTree(new File(args[0]));
        ArrayNode answers = MAPPER.createArrayNode();
        for (JsonNode request : requests) {
            answers.add(answer(request));
        }
        MAPPER.writerWithDefaultPrettyPrinter().writeValue(new File(args[1]), answers);
    }

    private static ObjectNode answer(JsonNode request) {
        ObjectNode out = MAPPER.createObjectNode();
        out.put("id", request.get("id").asInt());
        Schema schema;
        Object value;
        try {
            schema = schema(request.get("schema"));
            value = schema == null ? schemaless(request.get("value")) : value(schema, request.get("value"));
        } catch (Exception e) {
            // Connect refuses to build such a value at all (e.g. Struct.put checks types).
            out.put("error", "build: " + describe(e));
            return out;
        }
        try {
            byte[] bytes = convert(request, schema, value);
            if (bytes == null) {
                out.putNull("base64");
            } else {
                out.put("base64", Base64.getEncoder().encodeToString(bytes));
            }
        } catch (Exception e) {
            out.put("error", describe(e));
        }
        return out;
    }

    private static String describe(Throwable e) {
        StringBuilder sb = new StringBuilder(e.getClass().getSimpleName() + ": " + e.getMessage());
        for (Throwable cause = e.getCause(); cause != null; cause = cause.getCause()) {
            sb.append(" / ").append(cause.getClass().getSimpleName()).append(": ").append(cause.getMessage());
        }
        return sb.toString();
    }

    private static byte[] convert(JsonNode request, Schema schema, Object value) throws Exception {
        Class<?> cls = Class.forName(request.get("class").asText());
        Map<String, Object> config = new HashMap<>();
        request.get("config").fields().forEachRemaining(e -> config.put(e.getKey(), e.getValue().asText()));
        String topic = "topic";
        if (request.get("kind").asText().equals("header")) {
            HeaderConverter converter = (HeaderConverter) cls.getDeclaredConstructor().newInstance();
            config.put("converter.type", "header");
            converter.configure(config);
            return converter.fromConnectHeader(topic, request.get("header_key").asText(), schema, value);
        }
        Converter converter = (Converter) cls.getDeclaredConstructor().newInstance();
        converter.configure(config, false);
        return converter.fromConnectData(topic, schema, value);
    }

    /** A schema in Connect's JSON schema form; "default" holds an interchange value. */
    static Schema schema(JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        SchemaBuilder builder;
        String type = node.get("type").asText();
        switch (type) {
            case "int8": builder = SchemaBuilder.int8(); break;
            case "int16": builder = SchemaBuilder.int16(); break;
            case "int32": builder = SchemaBuilder.int32(); break;
            case "int64": builder = SchemaBuilder.int64(); break;
            case "float": builder = SchemaBuilder.float32(); break;
            case "double": builder = SchemaBuilder.float64(); break;
            case "boolean": builder = SchemaBuilder.bool(); break;
            case "string": builder = SchemaBuilder.string(); break;
            case "bytes": builder = SchemaBuilder.bytes(); break;
            case "array": builder = SchemaBuilder.array(schema(node.get("items"))); break;
            case "map": builder = SchemaBuilder.map(schema(node.get("keys")), schema(node.get("values"))); break;
            case "struct":
                builder = SchemaBuilder.struct();
                for (JsonNode field : node.get("fields")) {
                    builder.field(field.get("field").asText(), schema(field));
                }
                break;
            default: throw new IllegalArgumentException("unknown type " + type);
        }
        if (node.path("optional").asBoolean(false)) {
            builder.optional();
        }
        if (node.hasNonNull("name")) {
            builder.name(node.get("name").asText());
        }
        if (node.hasNonNull("version")) {
            builder.version(node.get("version").asInt());
        }
        if (node.hasNonNull("doc")) {
            builder.doc(node.get("doc").asText());
        }
        if (node.hasNonNull("parameters")) {
            node.get("parameters").fields().forEachRemaining(e -> builder.parameter(e.getKey(), e.getValue().asText()));
        }
        if (node.hasNonNull("default")) {
            builder.defaultValue(value(builder, node.get("default")));
        }
        return builder.build();
    }

    /** A value of ``schema`` from its interchange form (see vector_interchange.py). */
    static Object value(Schema schema, JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        if (schema.name() != null) {
            switch (schema.name()) {
                case Decimal.LOGICAL_NAME: return new BigDecimal(node.asText());
                case Date.LOGICAL_NAME: return new java.util.Date(LocalDate.parse(node.asText()).toEpochDay() * MILLIS_PER_DAY);
                case Time.LOGICAL_NAME: return new java.util.Date(LocalTime.parse(node.asText()).toNanoOfDay() / 1_000_000);
                case Timestamp.LOGICAL_NAME: return java.util.Date.from(Instant.parse(node.asText()));
                default: break;
            }
        }
        switch (schema.type()) {
            case INT8: return (byte) node.asLong();
            case INT16: return (short) node.asLong();
            case INT32: return (int) node.asLong();
            case INT64: return node.asLong();
            case FLOAT32: return (float) number(node);
            case FLOAT64: return number(node);
            case BOOLEAN: return node.asBoolean();
            case STRING: return node.asText();
            case BYTES: return Base64.getDecoder().decode(node.asText());
            case ARRAY: {
                List<Object> list = new ArrayList<>();
                for (JsonNode item : node) {
                    list.add(value(schema.valueSchema(), item));
                }
                return list;
            }
            case MAP: {
                Map<Object, Object> map = new LinkedHashMap<>();
                for (JsonNode pair : node) {
                    map.put(value(schema.keySchema(), pair.get(0)), value(schema.valueSchema(), pair.get(1)));
                }
                return map;
            }
            case STRUCT: {
                Struct struct = new Struct(schema);
                Iterator<Map.Entry<String, JsonNode>> fields = node.fields();
                while (fields.hasNext()) {
                    Map.Entry<String, JsonNode> field = fields.next();
                    if (!field.getValue().isNull()) {  // unset reads as null, and null may not be put
                        struct.put(field.getKey(), value(schema.field(field.getKey()).schema(), field.getValue()));
                    }
                }
                return struct;
            }
            default: throw new IllegalArgumentException("unknown type " + schema.type());
        }
    }

    /** A double, where the strings NaN, Infinity and -Infinity stand for themselves. */
    static double number(JsonNode node) {
        return node.isTextual() ? Double.parseDouble(node.asText()) : node.doubleValue();
    }

    /** A schemaless value: JSON as Connect's Java types, with tagged objects for the rest. */
    static Object schemaless(JsonNode node) {
        if (node == null || node.isNull()) {
            return null;
        }
        if (node.isObject()) {
            if (node.has("$bytes")) {
                return Base64.getDecoder().decode(node.get("$bytes").asText());
            }
            if (node.has("$float")) {
                return number(node.get("$float"));
            }
            Map<Object, Object> map = new LinkedHashMap<>();
            if (node.has("$map")) {
                for (JsonNode pair : node.get("$map")) {
                    map.put(schemaless(pair.get(0)), schemaless(pair.get(1)));
                }
            } else {
                node.fields().forEachRemaining(e -> map.put(e.getKey(), schemaless(e.getValue())));
            }
            return map;
        }
        if (node.isArray()) {
            List<Object> list = new ArrayList<>();
            node.forEach(item -> list.add(schemaless(item)));
            return list;
        }
        if (node.isIntegralNumber()) {
            return node.asLong();
        }
        if (node.isNumber()) {
            return node.doubleValue();
        }
        if (node.isBoolean()) {
            return node.asBoolean();
        }
        return node.asText();
    }
}
