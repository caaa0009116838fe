import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Virtual threads that sleep inside synchronized blocks. On JDK 21 every such sleep pins the
 * carrier (the monitor keeps the virtual thread mounted); on JDK 24+ (JEP 491) it does not.
 * Each virtual thread has its own lock, so the waits are pinning, not contention.
 * Arguments: virtual threads (default 8), sleep ms (default 20).
 */
public final class PinnedSleep {
    static final AtomicLong SLEEPS = new AtomicLong();

    static final class Ledger {
        synchronized void append(long sleepMs) throws InterruptedException {
            Thread.sleep(sleepMs);
            SLEEPS.incrementAndGet();
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 8;
        long sleepMs = args.length > 1 ? Long.parseLong(args[1]) : 20;
        ExecutorService executor = Vt.executor();
        for (int i = 0; i < threads; i++) {
            Ledger ledger = new Ledger();
            executor.submit(() -> {
                while (true) {
                    ledger.append(sleepMs);
                    Vt.spin(200_000);
                }
            });
        }
        Vt.ready();
        while (true) {
            Thread.sleep(1000);
            System.out.println("sleeps " + SLEEPS.get());
        }
    }
}
