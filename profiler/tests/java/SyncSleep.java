import java.util.concurrent.ExecutorService;

/**
 * A synchronized method that sleeps, {@code SyncSleep$Inventory.reserve}, called in a loop by
 * virtual threads (pinned on JDK 21) and by platform threads (blocked on every JDK). Each
 * caller has its own inventory, so nothing contends. The method starts interpreted and is
 * compiled after a few hundred calls.
 * Arguments: virtual threads (default 2), platform threads (default 1), sleep ms (default 20).
 */
public final class SyncSleep {
    static final class Inventory {
        long reserved;

        synchronized void reserve(long sleepMs) throws InterruptedException {
            Thread.sleep(sleepMs);
            reserved++;
        }
    }

    public static void main(String[] args) throws Exception {
        int virtual = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        int platform = args.length > 1 ? Integer.parseInt(args[1]) : 1;
        long sleepMs = args.length > 2 ? Long.parseLong(args[2]) : 20;
        ExecutorService executor = Vt.executor();
        for (int i = 0; i < virtual; i++) {
            executor.submit(() -> loop(sleepMs));
        }
        for (int i = 0; i < platform; i++) {
            Thread t = new Thread(() -> loop(sleepMs), "reserver-" + i);
            t.setDaemon(true);
            t.start();
        }
        Vt.ready();
        Thread.sleep(Long.MAX_VALUE);
    }

    static Void loop(long sleepMs) {
        Inventory inventory = new Inventory();
        try {
            while (true) {
                inventory.reserve(sleepMs);
            }
        } catch (InterruptedException e) {
            return null;
        }
    }
}
