import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Threads that come and go, for the tests of thread lifetimes. Prints {@code ready <pid>}, then:
 * <ul>
 * <li>{@code churn}: until killed, every 10 ms a platform thread that spins 1-5 ms, sleeps 3-30
 *     ms and spins 1 ms more, and 3 virtual threads that spin 0.3 ms, sleep 5 ms and spin 0.3
 *     ms. For each platform thread, once joined: {@code life <tid> <before start> <run start>
 *     <run end> <after join>} (System.nanoTime, which is CLOCK_MONOTONIC on Linux).</li>
 * <li>{@code late}: no virtual thread until a line {@code go} comes on stdin (so every carrier
 *     is born then); then 3 virtual threads in {@code Object.wait} inside {@code synchronized}
 *     (which makes JDK 21's scheduler add carriers) and 4 that sleep, 2 s in all; then
 *     {@code done <nanoTime>}, and nothing more runs.</li>
 * </ul>
 */
public final class Lifetimes {
    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "churn";
        Vt.ready();
        if (mode.equals("late")) {
            late();
        } else {
            churn();
        }
    }

    /** The OS thread id of the calling thread. */
    static long tid() {
        try {
            Path self = Files.readSymbolicLink(Path.of("/proc/thread-self"));
            return Long.parseLong(self.getFileName().toString());
        } catch (Exception e) {
            return -1;
        }
    }

    static final class Life {
        final Thread thread;
        final long beforeStart;
        volatile long tid;
        volatile long runStart;
        volatile long runEnd;

        Life(Thread thread, long beforeStart) {
            this.thread = thread;
            this.beforeStart = beforeStart;
        }
    }

    static void churn() throws Exception {
        LinkedBlockingQueue<Life> started = new LinkedBlockingQueue<>();
        Thread reaper = new Thread(() -> {
            try {
                while (true) {
                    Life life = started.take();
                    life.thread.join();
                    long afterJoin = System.nanoTime();
                    System.out.println("life " + life.tid + " " + life.beforeStart + " "
                            + life.runStart + " " + life.runEnd + " " + afterJoin);
                    System.out.flush();
                }
            } catch (InterruptedException e) {
                // ends with the JVM
            }
        }, "reaper");
        reaper.setDaemon(true);
        reaper.start();
        ExecutorService vts = Vt.executor();
        for (int n = 0; ; n++) {
            ThreadLocalRandom random = ThreadLocalRandom.current();
            long spin = random.nextLong(1_000_000, 5_000_000);
            long sleep = random.nextLong(3, 30);
            Life[] holder = new Life[1];
            Thread t = new Thread(() -> {
                Life life = holder[0];
                life.runStart = System.nanoTime();
                life.tid = tid();
                Vt.spin(spin);
                try {
                    Thread.sleep(sleep);
                } catch (InterruptedException e) {
                    return;
                }
                Vt.spin(1_000_000);
                life.runEnd = System.nanoTime();
            }, "short-" + n);
            holder[0] = new Life(t, System.nanoTime());
            t.start();
            started.add(holder[0]);
            for (int i = 0; i < 3; i++) {
                vts.submit(() -> {
                    Vt.spin(300_000);
                    Thread.sleep(5);
                    Vt.spin(300_000);
                    return null;
                });
            }
            Thread.sleep(10);
        }
    }

    static void late() throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        while (!"go".equals(in.readLine())) {
            // wait for the recording
        }
        Object lock = new Object();
        List<java.util.concurrent.Future<?>> all = new ArrayList<>();
        ExecutorService vts = Vt.executor();
        for (int i = 0; i < 3; i++) {
            all.add(vts.submit(() -> {
                for (int k = 0; k < 10; k++) {
                    synchronized (lock) {
                        lock.wait(200);
                    }
                }
                return null;
            }));
        }
        for (int i = 0; i < 4; i++) {
            all.add(vts.submit(() -> {
                for (int k = 0; k < 100; k++) {
                    Thread.sleep(20);
                    Vt.spin(100_000);
                }
                return null;
            }));
        }
        for (java.util.concurrent.Future<?> f : all) {
            f.get();
        }
        System.out.println("done " + System.nanoTime());
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
