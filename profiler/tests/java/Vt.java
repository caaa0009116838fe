import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;

/** Virtual threads through reflection: the workloads compile with --release 17 and run on 21+. */
final class Vt {
    private Vt() {}

    static ExecutorService executor() {
        try {
            return (ExecutorService) Executors.class.getMethod("newVirtualThreadPerTaskExecutor").invoke(null);
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException("virtual threads need Java 21 or later", e);
        }
    }

    /** Announces the PID once the workload runs; tests and the demo wait for this line. */
    static void ready() {
        System.out.println("ready " + ProcessHandle.current().pid());
        System.out.flush();
    }

    static void spin(long nanos) {
        long until = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < until) {
            x += x * 31 + 7;
        }
        if (x == 42) System.out.print("");
    }
}
