import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * Runs cases of the official RocketMQ remoting Java client
 * (org.apache.rocketmq:rocketmq-client) against one name server address,
 * at once, each in its own thread with its own clients (their own instance
 * names, so their own connections), and reports each as PASS or FAILED with
 * the reason. Exits 0 only when every case named passed.
 *
 * Usage: java Compat NAMESRV RUN_ID CASE...
 *
 * A case is a class named after it ("delay" is DelayCase) that implements
 * {@link Case}. A case the client version was not built with (TimerCase
 * needs a 5.x client) fails, saying so. Settings that only some cases need
 * come as system properties: compat.restart (a shell command that kills the
 * broker with SIGKILL and starts it again, for "kill") and compat.token (the
 * secret of the broker's -auth-token, for "acl").
 */
public final class Compat {
    /** One check against the broker; throws to fail, with a message saying why. */
    public interface Case {
        /** Runs the case; a thrown exception fails it, its message is the reason. */
        void run(Ctx c) throws Exception;

        /** How long the case may take in all before it is reported FAILED. */
        default long timeoutMillis() {
            return 90_000;
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 3) {
            System.err.println("usage: Compat NAMESRV RUN_ID CASE...");
            System.exit(2);
        }
        String namesrv = args[0], run = args[1];
        Map<String, Future<String>> running = new LinkedHashMap<>();
        Map<String, Case> cases = new LinkedHashMap<>();
        Map<String, String> failed = new LinkedHashMap<>();
        ExecutorService pool = Executors.newCachedThreadPool(r -> {
            Thread t = new Thread(r);
            t.setDaemon(true);
            return t;
        });
        for (int i = 2; i < args.length; i++) {
            String name = args[i];
            Case k;
            try {
                k = load(name);
            } catch (ReflectiveOperationException e) {
                failed.put(name, "no such case for this client version (" + e + ")");
                continue;
            }
            cases.put(name, k);
            Ctx c = new Ctx(name, namesrv, run);
            running.put(name, pool.submit(() -> {
                long t0 = System.nanoTime();
                try {
                    k.run(c);
                } finally {
                    c.closeAll();
                }
                return String.format(Locale.ROOT, "%.1f s", (System.nanoTime() - t0) / 1e9);
            }));
        }
        long start = System.currentTimeMillis();
        List<String> lines = new ArrayList<>();
        for (Map.Entry<String, Future<String>> e : running.entrySet()) {
            String name = e.getKey();
            long left = start + cases.get(name).timeoutMillis() - System.currentTimeMillis();
            try {
                lines.add("PASS   " + name + " (" + e.getValue().get(Math.max(left, 1), TimeUnit.MILLISECONDS) + ")");
            } catch (TimeoutException te) {
                failed.put(name, "did not finish in " + cases.get(name).timeoutMillis() / 1000 + " s");
            } catch (java.util.concurrent.ExecutionException ee) {
                Throwable cause = ee.getCause();
                failed.put(name, cause instanceof CaseFailure ? cause.getMessage() : cause.toString());
                if (!(cause instanceof CaseFailure)) {
                    cause.printStackTrace();
                }
            }
        }
        for (Map.Entry<String, String> f : failed.entrySet()) {
            lines.add("FAILED " + f.getKey() + ": " + f.getValue());
        }
        System.out.flush();
        for (String l : lines) {
            System.out.println(l);
        }
        System.out.flush();
        // The clients' own threads are not daemons and a failed case may
        // leave a client that will not shut down: halt rather than hang.
        Runtime.getRuntime().halt(failed.isEmpty() ? 0 : 1);
    }

    private static Case load(String name) throws ReflectiveOperationException {
        String cls = Character.toUpperCase(name.charAt(0)) + name.substring(1) + "Case";
        return (Case) Class.forName(cls).getDeclaredConstructor().newInstance();
    }
}
