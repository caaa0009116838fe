import java.util.concurrent.CountDownLatch;

/**
 * Waits that begin before any profiler attaches: a virtual thread that sleeps for ten minutes
 * inside synchronized (on JDK 21 it pins its carrier all along), and two platform threads
 * deadlocked on each other's monitor for good. "ready" is printed once all three are in
 * their waits. With the argument "until-told", the virtual thread waits on a latch instead
 * (pinned all the same), until a line comes on standard input; it prints
 * "released <System.nanoTime()>" as that wait ends.
 */
public final class Stuck {
    static final CountDownLatch TOLD = new CountDownLatch(1);

    static final class Ledger {
        synchronized void hold() throws InterruptedException {
            Thread.sleep(600_000);
        }

        synchronized void holdUntilTold() throws InterruptedException {
            TOLD.await();
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
        boolean untilTold = args.length > 0 && args[0].equals("until-told");
        Vt.executor().submit(() -> {
            if (untilTold) {
                new Ledger().holdUntilTold();
            } else {
                new Ledger().hold();
            }
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
        if (untilTold) {
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
            TOLD.countDown();
        }
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
