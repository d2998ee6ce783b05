import java.util.Map;

/** JSON event lines on stdout for the Python side (javakit.JavaRun.events), without a JSON library. */
final class Json {
    private Json() {
    }

    /** Prints {"op": op, k1: v1, ...}; values are strings, numbers, booleans, null, lists or maps. */
    static void event(String op, Object... keyValues) {
        StringBuilder sb = new StringBuilder("{\"op\":").append(quote(op));
        for (int i = 0; i + 1 < keyValues.length; i += 2) {
            sb.append(',').append(quote(String.valueOf(keyValues[i]))).append(':');
            value(sb, keyValues[i + 1]);
        }
        synchronized (System.out) {
            System.out.println(sb.append('}'));
            System.out.flush();
        }
    }

    static void value(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : ((Map<?, ?>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                sb.append(quote(String.valueOf(e.getKey()))).append(':');
                value(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Iterable) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Iterable<?>) v) {
                if (!first) sb.append(',');
                first = false;
                value(sb, o);
            }
            sb.append(']');
        } else {
            sb.append(quote(String.valueOf(v)));
        }
    }

    static String quote(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) sb.append(String.format("\\u%04x", (int) c)); else sb.append(c);
            }
        }
        return sb.append('"').toString();
    }
}
