import com.alibaba.fastjson.JSON;
import java.lang.reflect.Field;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.common.action.Action;
import org.apache.rocketmq.common.action.RocketMQAction;
import org.apache.rocketmq.common.resource.RocketMQResource;
import org.apache.rocketmq.remoting.protocol.RequestHeaderRegistry;

/**
 * Prints, as one JSON object, what the 5.x broker's authorization reads off each request code whose header class
 * carries {@code @RocketMQAction} (RequestHeaderRegistry, the table DefaultAuthorizationContextBuilder uses for the
 * codes it has no case of its own for): {code: {"header", "resource", "actions", "fields": [{"name", "type",
 * "splitter"}]}}. rmqd's table (rmqd.auth.remoting_contexts.ANNOTATED) is compared with it.
 */
public class AuthActionTable {
    public static void main(String[] args) throws Exception {
        RequestHeaderRegistry registry = RequestHeaderRegistry.getInstance();
        registry.initialize();
        Field mapField = RequestHeaderRegistry.class.getDeclaredField("requestHeaderMap");
        mapField.setAccessible(true);
        @SuppressWarnings("unchecked")
        Map<Integer, Class<?>> map = (Map<Integer, Class<?>>) mapField.get(registry);
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<Integer, Class<?>> e : map.entrySet()) {
            Class<?> clazz = e.getValue();
            RocketMQAction action = clazz.getAnnotation(RocketMQAction.class);
            Map<String, Object> row = new LinkedHashMap<>();
            row.put("header", clazz.getSimpleName());
            row.put("resource", action.resource().getName());
            List<String> actions = new ArrayList<>();
            for (Action a : action.action()) {
                actions.add(a.getName());
            }
            row.put("actions", actions);
            List<Object> fields = new ArrayList<>();
            for (Field f : clazz.getDeclaredFields()) {
                RocketMQResource res = f.getAnnotation(RocketMQResource.class);
                if (res != null) {
                    Map<String, Object> fr = new LinkedHashMap<>();
                    fr.put("name", f.getName());
                    fr.put("type", res.value().getName());
                    fr.put("splitter", res.splitter());
                    fields.add(fr);
                }
            }
            row.put("fields", fields);
            out.put(String.valueOf(e.getKey()), row);
        }
        System.out.println(JSON.toJSONString(out));
    }
}
