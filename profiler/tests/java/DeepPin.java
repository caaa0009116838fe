import java.net.URL;
import java.net.URLClassLoader;
import java.nio.file.Paths;
import java.util.concurrent.ExecutorService;

/**
 * Virtual threads that unmount (a sleep outside any monitor freezes their older frames into a
 * stack chunk), then pin three calls deeper: {@code monitor} sleeps in a synchronized method
 * (pins on JDK 21), {@code clinit} sleeps in the static initializer of a class loaded afresh
 * each time by a new class loader (pins on every JDK: a VM frame is on the stack). Each task
 * has its own monitor: nothing contends.
 * Arguments: mode (monitor | clinit), virtual threads (default 4), sleep ms (default 3).
 */
public final class DeepPin {
    static long sleepMs = 3;

    /** Initialized anew by each class loader: its initializer sleeps. */
    public static final class Slow {
        static {
            try {
                Thread.sleep(sleepMs());
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
        }

        static long sleepMs() {
            return Long.getLong("deeppin.sleep", 3);
        }
    }

    static final class Account {
        long updates;

        synchronized void update() throws InterruptedException {
            Thread.sleep(sleepMs);
            updates++;
        }
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "monitor";
        int virtual = args.length > 1 ? Integer.parseInt(args[1]) : 4;
        sleepMs = args.length > 2 ? Long.parseLong(args[2]) : 3;
        System.setProperty("deeppin.sleep", Long.toString(sleepMs));
        URL classes = Paths.get(System.getProperty("java.class.path").split(":")[0]).toUri().toURL();
        ExecutorService executor = Vt.executor();
        for (int i = 0; i < virtual; i++) {
            executor.submit(() -> task(mode, classes));
        }
        Vt.ready();
        Thread.sleep(Long.MAX_VALUE);
    }

    static Void task(String mode, URL classes) throws Exception {
        Account account = new Account();
        while (true) {
            Thread.sleep(1); // unmounts: this frame and its callers are frozen
            outer(mode, classes, account);
        }
    }

    static void outer(String mode, URL classes, Account account) throws Exception {
        middle(mode, classes, account);
    }

    static void middle(String mode, URL classes, Account account) throws Exception {
        if (mode.equals("clinit")) {
            try (URLClassLoader loader = keep(new URLClassLoader(new URL[] {classes}, null))) {
                Class.forName("DeepPin$Slow", true, loader);
            }
        } else {
            account.update();
        }
    }

    /**
     * The latest loaders stay reachable, so their classes are not unloaded (and their methods'
     * metadata freed) within seconds of pinning, while a profiler may still be naming their
     * frames: a real service does not unload a class per request.
     */
    static final java.util.ArrayDeque<URLClassLoader> LOADERS = new java.util.ArrayDeque<>();

    static URLClassLoader keep(URLClassLoader loader) {
        synchronized (LOADERS) {
            LOADERS.addLast(loader);
            if (LOADERS.size() > 4096) {
                LOADERS.pollFirst();
            }
        }
        return loader;
    }
}
