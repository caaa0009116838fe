import java.util.concurrent.locks.ReentrantLock;

/**
 * Platform threads contending on one ReentrantLock: each holds it 5 ms at a time
 * ({@code LockContention$Account.transfer}) while the others wait, so every wait ends when a
 * holder calls {@code unlock}. Arguments: threads (default 3).
 */
public final class LockContention {
    static final class Account {
        private final ReentrantLock lock = new ReentrantLock();
        private long balance;

        void transfer() throws InterruptedException {
            lock.lock();
            try {
                balance++;
                Thread.sleep(5);
            } finally {
                lock.unlock();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 3;
        Account account = new Account();
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        account.transfer();
                    }
                } catch (InterruptedException e) {
                    // stop
                }
            }, "teller-" + i);
            t.setDaemon(true);
            t.start();
        }
        Vt.ready();
        Thread.sleep(Long.MAX_VALUE);
    }
}
