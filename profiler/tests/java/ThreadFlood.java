/**
 * A JVM whose thread list is large and never still: many platform threads with long names,
 * asleep, and one more thread born and ended in a loop, so that the list changes thousands of
 * times a second. Arguments: threads (default 1900), name length in characters (default 4096).
 * Prints "ready <pid>" once every sleeper is started, then "churned <n>" once a second.
 */
public final class ThreadFlood {
    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 1900;
        int length = args.length > 1 ? Integer.parseInt(args[1]) : 4096;
        for (int i = 0; i < threads; i++) {
            String prefix = String.format("flood-%05d-", i);
            String name = prefix + "x".repeat(Math.max(0, length - prefix.length()));
            Thread sleeper = new Thread(null, () -> {
                try {
                    Thread.sleep(Long.MAX_VALUE);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }, name, 256 << 10);
            sleeper.setDaemon(true);
            sleeper.start();
        }
        java.util.concurrent.atomic.AtomicLong churned = new java.util.concurrent.atomic.AtomicLong();
        Thread churn = new Thread(() -> {
            try {
                while (true) {
                    Thread t = new Thread(() -> {}, "churn");
                    t.start();
                    t.join();
                    churned.incrementAndGet();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "churner");
        churn.setDaemon(true);
        Vt.ready();
        churn.start();
        while (true) {
            Thread.sleep(1000);
            System.out.println("churned " + churned.get());
        }
    }
}
