import java.util.concurrent.ExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The demo service: a small "shop" on virtual threads with one bad habit. Orders are handled on
 * virtual threads; most wait healthily (sleep, lock outside synchronized: they unmount), but the
 * audit log writes inside a synchronized method and sleeps there, pinning its carrier. A platform
 * thread pool contends on a ReentrantLock for contrast. Runs until killed.
 */
public final class Demo {
    static final class AuditLog {
        synchronized void record(int order) throws InterruptedException {
            Thread.sleep(15); // slow I/O while holding the monitor: pins the carrier on JDK 21
        }
    }

    static final class Inventory {
        private final ReentrantLock lock = new ReentrantLock();
        private long stock = 1_000_000;

        void reserve() throws InterruptedException {
            lock.lock();
            try {
                stock--;
                TimeUnit.MILLISECONDS.sleep(2);
            } finally {
                lock.unlock();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        AuditLog audit = new AuditLog();
        Inventory inventory = new Inventory();
        ExecutorService orders = Vt.executor();
        for (int i = 0; i < 16; i++) {
            final int worker = i;
            orders.submit(() -> {
                int order = 0;
                while (true) {
                    order++;
                    Vt.spin(300_000);
                    Thread.sleep(10); // a healthy wait: the virtual thread unmounts
                    if (worker % 4 == 0) {
                        audit.record(order);
                    }
                }
            });
        }
        for (int i = 0; i < 2; i++) {
            Thread t = new Thread(() -> {
                try {
                    while (true) {
                        inventory.reserve();
                    }
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, "inventory-" + i);
            t.setDaemon(true);
            t.start();
        }
        Vt.ready();
        Thread.sleep(Long.MAX_VALUE);
    }
}
