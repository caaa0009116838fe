import java.util.concurrent.ExecutorService;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A service-like load for the overhead benchmark: many virtual threads each computing a
 * little per operation, then, at random, a 200 us park (6 in 10), a short ReentrantLock
 * section (2 in 10), a 50 us park inside synchronized (1 in 10: pinned on JDK 21-23) or a
 * yield. On 2 carriers that is tens of thousands of parks a second and thousands of pinned
 * waits. Prints "ops <count> <nanoTime>" every 500 ms.
 * Arguments: virtual threads (default 500), computing per operation in ns (default 5000).
 */
public final class Service {
    static final AtomicLong OPS = new AtomicLong();
    static final ReentrantLock SHARED = new ReentrantLock();
    static long counter;

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 500;
        long compute = args.length > 1 ? Long.parseLong(args[1]) : 5_000;
        ExecutorService executor = Vt.executor();
        for (int i = 0; i < threads; i++) {
            final Object monitor = new Object();
            executor.submit(() -> {
                while (true) {
                    Vt.spin(compute);
                    int r = ThreadLocalRandom.current().nextInt(10);
                    if (r < 6) {
                        LockSupport.parkNanos(200_000);
                    } else if (r < 8) {
                        SHARED.lock();
                        try {
                            counter++;
                        } finally {
                            SHARED.unlock();
                        }
                    } else if (r < 9) {
                        synchronized (monitor) {
                            LockSupport.parkNanos(50_000);
                        }
                    } else {
                        Thread.yield();
                    }
                    OPS.incrementAndGet();
                }
            });
        }
        Vt.ready();
        while (true) {
            Thread.sleep(500);
            System.out.println("ops " + OPS.get() + " " + System.nanoTime());
        }
    }
}
