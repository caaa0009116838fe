import java.util.concurrent.CountDownLatch;

/**
 * Waits that begin before any profiler attaches: a virtual thread that sleeps inside
 * synchronized (on JDK 21 it pins its carrier all along), for ten minutes or the ms given as
 * the first argument, and two platform threads deadlocked on each other's monitor for good.
 * "ready" is printed once all three are in their waits; "released <System.nanoTime()>" as
 * the sleep ends.
 */
public final class Stuck {
    static final class Ledger {
        synchronized void hold(long ms) throws InterruptedException {
            Thread.sleep(ms);
            System.out.println("released " + System.nanoTime());
        }
    }

    static final class Account {
        synchronized void transferTo(Account other, CountDownLatch both) throws InterruptedException {
            both.countDown();
            both.await();
            other.deposit();
        }

        synchronized void deposit() {}
    }

    public static void main(String[] args) throws Exception {
        long holdMs = args.length > 0 ? Long.parseLong(args[0]) : 600_000;
        Vt.executor().submit(() -> {
            new Ledger().hold(holdMs);
            return null;
        });
        Account a = new Account();
        Account b = new Account();
        CountDownLatch both = new CountDownLatch(2);
        startDeadlocked("deadlock-a", a, b, both);
        startDeadlocked("deadlock-b", b, a, both);
        both.await();
        // Time for the sleep and the two monitor entries to block.
        Thread.sleep(500);
        Vt.ready();
        Thread.sleep(600_000);
    }

    static void startDeadlocked(String name, Account from, Account to, CountDownLatch both) {
        Thread t = new Thread(() -> {
            try {
                from.transferTo(to, both);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, name);
        t.setDaemon(true);
        t.start();
    }
}
