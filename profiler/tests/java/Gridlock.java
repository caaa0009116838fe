import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The JDK 21 gridlock: a virtual thread takes a ReentrantLock and sleeps holding it (it
 * unmounts: a java.util.concurrent lock does not pin), while as many other virtual threads as
 * there are carriers wait for that lock inside synchronized, which on JDK 21-23 pins each one's
 * carrier. The owner's sleep ends, but no carrier is free to run it, so it cannot release the
 * lock: the pool stalls until the waiters' tryLock times out (200 ms) and frees their carriers.
 * Then it starts over. On JDK 24+ (JEP 491) the waiters unmount and nothing stalls.
 * Prints {@code owner <id>} (the owner's thread id) after {@code ready}, then every second
 * {@code timeouts N}.
 * Arguments: waiters (default 4: the tests' parallelism).
 */
public final class Gridlock {
    static final ReentrantLock LOCK = new ReentrantLock();
    static final AtomicLong TIMEOUTS = new AtomicLong();
    static volatile long ownerId = -1;

    static final class Ledger {
        synchronized void post() throws InterruptedException {
            if (LOCK.tryLock(200, TimeUnit.MILLISECONDS)) {
                LOCK.unlock();
            } else {
                TIMEOUTS.incrementAndGet();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        int waiters = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        ExecutorService vts = Vt.executor();
        vts.submit(() -> {
            ownerId = Thread.currentThread().getId();
            while (true) {
                LOCK.lock();
                try {
                    Thread.sleep(50);
                } finally {
                    LOCK.unlock();
                }
                Thread.sleep(20);
            }
        });
        for (int i = 0; i < waiters; i++) {
            Ledger ledger = new Ledger();
            vts.submit(() -> {
                while (true) {
                    ledger.post();
                    Thread.sleep(5);
                }
            });
        }
        Vt.ready();
        while (ownerId < 0) Thread.sleep(1);
        System.out.println("owner " + ownerId);
        System.out.flush();
        while (true) {
            Thread.sleep(1000);
            System.out.println("timeouts " + TIMEOUTS.get());
        }
    }
}
