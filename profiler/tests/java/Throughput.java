import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A steady load for the overhead benchmark: virtual threads that compute, wait healthily, and
 * now and then sleep inside synchronized (pinning on JDK 21), so both pinprof's per-switch work
 * and its pinning path are exercised. Prints "ops <count> <nanoTime>" every 500 ms.
 * Arguments: virtual threads (default 64), one sleep in N inside synchronized (default 10; 1
 * makes every wait a pinning one on JDK 21).
 */
public final class Throughput {
    static final AtomicLong OPS = new AtomicLong();

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 64;
        int pinEvery = args.length > 1 ? Integer.parseInt(args[1]) : 10;
        ExecutorService executor = Vt.executor();
        for (int i = 0; i < threads; i++) {
            final Object lock = new Object();
            executor.submit(() -> {
                long n = 0;
                while (true) {
                    Vt.spin(50_000);
                    if (++n % pinEvery == 0) {
                        synchronized (lock) {
                            Thread.sleep(1);
                        }
                    } else {
                        Thread.sleep(1);
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
