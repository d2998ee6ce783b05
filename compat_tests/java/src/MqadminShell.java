import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * The kit's mqadmin, many sub-commands in one JVM: each stdin line is a JSON object
 * {"id": N, "args": [sub-command, options...], "timeoutMs": N}; each is run through mqadmin's own entry point
 * (MQAdminStartup.main0, what bin/mqadmin runs) with System.out/err captured, and answered with one line
 * {"id": N, "out": ..., "ms": ..., "timedOut": bool}. Saves a JVM start per sub-command. MQAdminStartup's list of
 * sub-command objects is emptied before each run, so every run gets new ones, as bin/mqadmin does. A sub-command
 * that times out is interrupted and given 5 s to finish printing before the next one starts (System.out is global).
 * A sub-command ends by shutting its admin client down, and the remoting client's shutdown joins its
 * NettyEventExecutor thread, which notices the stop only when its 3 s queue poll returns: the shell interrupts
 * that thread once the sub-command is inside NettyRemotingClient.shutdown (what the JVM's exit does for bin/mqadmin),
 * which saves up to 3 s per sub-command and changes nothing printed.
 */
public class MqadminShell {
    public static void main(String[] args) throws Exception {
        PrintStream realOut = System.out;
        PrintStream realErr = System.err;
        ExecutorService worker = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r, "mqadmin-command");
            t.setDaemon(true);
            return t;
        });
        // 4.9.8 names the list subCommandList, 5.x SUB_COMMANDS: the one static List field either way
        java.lang.reflect.Field listField = null;
        for (java.lang.reflect.Field f : MQAdminStartup.class.getDeclaredFields()) {
            if (java.lang.reflect.Modifier.isStatic(f.getModifiers()) && List.class.isAssignableFrom(f.getType())) {
                listField = f;
            }
        }
        listField.setAccessible(true);
        List<?> commands = (List<?>) listField.get(null);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        realOut.println("{\"ready\":true}");
        realOut.flush();
        String line;
        while ((line = in.readLine()) != null) {
            if (line.trim().isEmpty()) continue;
            Map<String, Object> req = JSON.parseObject(line);
            List<Object> argList = (List<Object>) req.get("args");
            String[] cmd = new String[argList.size()];
            for (int i = 0; i < cmd.length; i++) cmd[i] = String.valueOf(argList.get(i));
            long timeoutMs = req.containsKey("timeoutMs") ? ((Number) req.get("timeoutMs")).longValue() : 60000L;
            ByteArrayOutputStream buf = new ByteArrayOutputStream();
            PrintStream capture = new PrintStream(buf, true, "UTF-8");
            System.setOut(capture);
            System.setErr(capture);
            long t0 = System.nanoTime();
            boolean timedOut = false;
            commands.clear();   // fresh sub-command objects, as in a new JVM (some cache a shut-down admin client)
            CountDownLatch done = new CountDownLatch(1);
            java.util.concurrent.atomic.AtomicReference<Thread> runner = new java.util.concurrent.atomic.AtomicReference<>();
            Future<?> f = worker.submit(() -> {
                runner.set(Thread.currentThread());
                try {
                    MQAdminStartup.main0(cmd, null);
                } finally {
                    done.countDown();
                }
            });
            try {
                long deadline = System.nanoTime() + timeoutMs * 1_000_000L;
                while (true) {
                    try {
                        f.get(20, TimeUnit.MILLISECONDS);
                        break;
                    } catch (TimeoutException tick) {
                        if (System.nanoTime() >= deadline) {
                            throw tick;
                        }
                        nudgeShutdown(runner.get());
                    }
                }
            } catch (TimeoutException e) {
                timedOut = true;
                f.cancel(true);
                // what the interrupted sub-command still prints belongs to it, not to the next one
                done.await(5, TimeUnit.SECONDS);
            } catch (Exception e) {
                e.printStackTrace(capture);
            } finally {
                System.setOut(realOut);
                System.setErr(realErr);
            }
            capture.flush();
            Map<String, Object> res = new LinkedHashMap<>();
            res.put("id", req.get("id"));
            res.put("out", new String(buf.toByteArray(), StandardCharsets.UTF_8));
            res.put("ms", (System.nanoTime() - t0) / 1000000);
            res.put("timedOut", timedOut);
            realOut.println(JSON.toJSONString(res));
            realOut.flush();
        }
        System.exit(0);
    }

    /** Interrupt the NettyEventExecutor threads while {@code runner} waits for them in NettyRemotingClient.shutdown. */
    static void nudgeShutdown(Thread runner) {
        if (runner == null) {
            return;
        }
        boolean inShutdown = false;
        for (StackTraceElement frame : runner.getStackTrace()) {
            if (frame.getMethodName().equals("shutdown") && frame.getClassName().endsWith("NettyRemotingClient")) {
                inShutdown = true;
                break;
            }
        }
        if (!inShutdown) {
            return;
        }
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getName().equals("NettyEventExecutor") && t.isAlive()) {
                t.interrupt();
            }
        }
    }
}
