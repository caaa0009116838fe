import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Virtual threads waiting unmounted on one ReentrantLock: a restocker (a virtual thread) holds
 * it for {@code HOLD_MS} once a second ({@code UnmountedLock$Inventory.restock}, sleeping while
 * it holds it), while {@code waiters} virtual threads take it in turn for a moment
 * ({@code UnmountedLock$Inventory.take}). No OS thread blocks: each waiter parks unmounted.
 *
 * <p>The restocker prints {@code holding <nanoTime>} as it takes the lock. Each waiter times
 * every {@code lock()} (System.nanoTime). On "report" on standard input
 * it prints {@code wait <start> <end>} for each timed acquisition, {@code hold <start> <end>}
 * for each restock, {@code restocker <threadId>}, then {@code done}. Arguments: waiters (default 20), hold ms (300).
 */
public final class UnmountedLock {
    static final ConcurrentLinkedQueue<long[]> WAITS = new ConcurrentLinkedQueue<>();
    static final ConcurrentLinkedQueue<long[]> HOLDS = new ConcurrentLinkedQueue<>();
    static volatile long restocker;

    static final class Inventory {
        private final ReentrantLock lock = new ReentrantLock();
        private long stock;

        void restock(long holdMs) throws InterruptedException {
            lock.lock();
            long start = System.nanoTime();
            try {
                System.out.println("holding " + start);
                Thread.sleep(holdMs);
                stock += 100;
            } finally {
                HOLDS.add(new long[] {start, System.nanoTime()});
                lock.unlock();
            }
        }

        void take() {
            long start = System.nanoTime();
            lock.lock();
            long end = System.nanoTime();
            try {
                WAITS.add(new long[] {start, end});
                stock--;
            } finally {
                lock.unlock();
            }
        }
    }

    public static void main(String[] args) throws Exception {
        int waiters = args.length > 0 ? Integer.parseInt(args[0]) : 20;
        long holdMs = args.length > 1 ? Long.parseLong(args[1]) : 300;
        Inventory inventory = new Inventory();
        var executor = Vt.executor();
        // First: the restocker's lines follow it.
        Vt.ready();
        executor.submit(() -> {
            restocker = Thread.currentThread().getId();
            while (true) {
                inventory.restock(holdMs);
                Thread.sleep(1000 - holdMs);
            }
        });
        for (int i = 0; i < waiters; i++) {
            final int n = i;
            executor.submit(() -> {
                while (true) {
                    inventory.take();
                    Thread.sleep(20 + n % 7);
                }
            });
        }
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("report")) {
                StringBuilder out = new StringBuilder();
                for (long[] w : WAITS) out.append("wait ").append(w[0]).append(' ').append(w[1]).append('\n');
                for (long[] h : HOLDS) out.append("hold ").append(h[0]).append(' ').append(h[1]).append('\n');
                out.append("restocker ").append(restocker).append('\n');
                out.append("done");
                System.out.println(out);
                System.out.flush();
            }
        }
    }
}
