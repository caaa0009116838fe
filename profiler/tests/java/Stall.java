import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;

/**
 * Every carrier pinned at once, for spans the workload times itself. After a pause (time for
 * a profiler to attach), for each argument D: as many virtual threads as there are carriers
 * each sleep D ms inside a synchronized method (on JDK 21 that pins its carrier), then all
 * rest a second. Each pinned sleep prints "pinned START END" in System.nanoTime (the kernel's
 * CLOCK_MONOTONIC on Linux). Arguments: pause ms, then D ms... (default 2000 3000 1000).
 */
public final class Stall {
    static final class Gate {
        synchronized void hold(long ms) throws InterruptedException {
            long start = System.nanoTime();
            Thread.sleep(ms);
            long end = System.nanoTime();
            System.out.println("pinned " + start + " " + end);
        }
    }

    public static void main(String[] args) throws Exception {
        long pause = args.length > 0 ? Long.parseLong(args[0]) : 2000;
        List<Long> stalls = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            stalls.add(Long.parseLong(args[i]));
        }
        if (stalls.isEmpty()) {
            stalls = List.of(3000L, 1000L);
        }
        int carriers = Integer.getInteger(
                "jdk.virtualThreadScheduler.parallelism", Runtime.getRuntime().availableProcessors());
        ExecutorService executor = Vt.executor();
        Vt.ready();
        Thread.sleep(pause);
        for (long ms : stalls) {
            List<Future<?>> held = new ArrayList<>();
            for (int i = 0; i < carriers; i++) {
                Gate gate = new Gate();
                held.add(executor.submit(() -> {
                    gate.hold(ms);
                    return null;
                }));
            }
            for (Future<?> f : held) {
                f.get();
            }
            Thread.sleep(1000);
        }
        System.out.println("done");
        while (true) {
            Thread.sleep(1000);
        }
    }
}
