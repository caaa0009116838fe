/**
 * A small synchronized method, {@code InlinedSync$Counter.bump}, that the JIT inlines into its
 * hot caller: it is called millions of times, and one call in 256 sleeps 2 ms through another
 * small method, {@code InlinedSync.pause}. Once compiled, the sleeping calls run in one
 * compiled frame that holds all three methods. Platform threads "bumper-N".
 * Arguments: threads (default 1).
 */
public final class InlinedSync {
    static final class Counter {
        long count;

        synchronized void bump() throws InterruptedException {
            if ((++count & 255) == 0) {
                pause();
            }
        }
    }

    static void pause() throws InterruptedException {
        Thread.sleep(2);
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 1;
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(InlinedSync::run, "bumper-" + i);
            t.setDaemon(true);
            t.start();
        }
        Vt.ready();
        Thread.sleep(Long.MAX_VALUE);
    }

    static void run() {
        Counter counter = new Counter();
        try {
            while (true) {
                counter.bump();
            }
        } catch (InterruptedException e) {
            // stop
        }
    }
}
