import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.ForkJoinPool;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Pinning patterns for the carrier tests, chosen by the arguments (any combination):
 * <ul>
 * <li>{@code sleep}: 2 virtual threads sleep 10 ms inside {@code synchronized} (pins on 21);</li>
 * <li>{@code socket}: 2 virtual threads read a socket inside {@code synchronized}; the server
 *     answers after 15 ms (pins on 21);</li>
 * <li>{@code quick}: pinned waits well under a millisecond (pins on 21): a virtual thread sleeps
 *     0.3 ms inside {@code synchronized}, another reads a socket inside {@code synchronized}
 *     whose server answers after 0.2 ms; each spins 0.5 ms between waits ({@code quick N}
 *     counts both);</li>
 * <li>{@code contend}: a virtual thread holds a monitor 40 ms at a time while 2 others try to
 *     enter it; each contended entry is counted ({@code contended N});</li>
 * <li>{@code clinit}: 4 virtual threads need a class whose static initializer sleeps 20 times
 *     10 ms; a new such class every second (pins on 21 and 25);</li>
 * <li>{@code compensate}: virtual threads in {@code Object.wait}, which makes the scheduler add
 *     carriers on 21, and a separate ForkJoinPool whose workers are not carriers.</li>
 * <li>{@code churn}: a platform thread allocates without pause, keeping a little of it alive:
 *     with a small heap ({@code -Xmx32m}) the collector runs every few milliseconds.</li>
 * </ul>
 * Prints {@code ready <pid>}, then every 100 ms and as it exits {@code counts <System.nanoTime>
 * sleeps N reads N contended N inits N}, and {@code carriers <names>} whenever the set of carrier threads changes
 * (the JVM's own view: threads of class {@code jdk.internal.misc.CarrierThread}).
 */
public final class Pinning {
    static final AtomicLong SLEEPS = new AtomicLong();
    static final AtomicLong READS = new AtomicLong();
    static final AtomicLong CONTENDED = new AtomicLong();
    static final AtomicLong INITS = new AtomicLong();
    static final AtomicLong QUICK = new AtomicLong();

    static final class Ledger {
        synchronized void append() throws InterruptedException {
            Thread.sleep(10);
            SLEEPS.incrementAndGet();
        }
    }

    static final class Brief {
        synchronized void append() throws InterruptedException {
            Thread.sleep(0, 300_000);
            QUICK.incrementAndGet();
        }
    }

    static final class Channel {
        final Socket socket;

        Channel(Socket socket) {
            this.socket = socket;
        }

        synchronized void call() throws Exception {
            OutputStream out = socket.getOutputStream();
            InputStream in = socket.getInputStream();
            out.write(1);
            out.flush();
            if (in.read() < 0) throw new IllegalStateException("server closed");
            READS.incrementAndGet();
        }
    }

    /** The one lock the contending virtual threads share: a class of its own, to be named. */
    static final class Till {}

    static final Till SHARED = new Till();
    static volatile boolean held;

    public static void main(String[] args) throws Exception {
        List<String> modes = List.of(args);
        ExecutorService vts = Vt.executor();
        if (modes.contains("sleep")) {
            for (int i = 0; i < 2; i++) {
                Ledger ledger = new Ledger();
                vts.submit(() -> {
                    while (true) {
                        ledger.append();
                        Vt.spin(100_000);
                    }
                });
            }
        }
        if (modes.contains("socket")) {
            ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread acceptor = new Thread(() -> serve(server, 15_000_000), "slow-server");
            acceptor.setDaemon(true);
            acceptor.start();
            for (int i = 0; i < 2; i++) {
                Channel channel = new Channel(new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort()));
                vts.submit(() -> {
                    while (true) {
                        channel.call();
                        Vt.spin(100_000);
                    }
                });
            }
        }
        if (modes.contains("quick")) {
            Brief brief = new Brief();
            vts.submit(() -> {
                while (true) {
                    brief.append();
                    Vt.spin(500_000);
                }
            });
            ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread acceptor = new Thread(() -> serve(server, 200_000), "quick-server");
            acceptor.setDaemon(true);
            acceptor.start();
            Channel channel = new Channel(new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort()));
            vts.submit(() -> {
                while (true) {
                    channel.call();
                    QUICK.incrementAndGet();
                    Vt.spin(500_000);
                }
            });
        }
        if (modes.contains("contend")) {
            vts.submit(() -> {
                while (true) {
                    synchronized (SHARED) {
                        held = true;
                        Vt.spin(40_000_000);
                        held = false;
                    }
                    Thread.sleep(5);
                }
            });
            for (int i = 0; i < 2; i++) {
                vts.submit(() -> {
                    while (true) {
                        Thread.sleep(13);
                        // Counted only when the holder is inside: the entry must then wait.
                        boolean contended = held;
                        synchronized (SHARED) {
                            if (contended) CONTENDED.incrementAndGet();
                        }
                    }
                });
            }
        }
        if (modes.contains("clinit")) {
            Thread driver = new Thread(() -> initClasses(vts), "clinit-driver");
            driver.setDaemon(true);
            driver.start();
        }
        if (modes.contains("compensate")) {
            Object lock = new Object();
            for (int i = 0; i < 3; i++) {
                vts.submit(() -> {
                    while (true) {
                        synchronized (lock) {
                            lock.wait(50);
                        }
                    }
                });
            }
            ForkJoinPool other = new ForkJoinPool(2);
            for (int i = 0; i < 2; i++) {
                other.submit(() -> {
                    while (true) {
                        Thread.sleep(20);
                    }
                });
            }
        }
        if (modes.contains("churn")) {
            Thread churn = new Thread(Pinning::churn, "churn");
            churn.setDaemon(true);
            churn.start();
        }
        // The last counts as the JVM exits (SIGTERM): the truth up to the end, which comes at
        // once (halt: the rest of the JVM's shutdown, which can take a while, would pin on).
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            printCounts();
            System.out.flush();
            Runtime.getRuntime().halt(143);
        }, "last-counts"));
        Vt.ready();
        String carriers = "";
        while (true) {
            Thread.sleep(100);
            printCounts();
            String now = carrierNames();
            if (!now.equals(carriers)) {
                carriers = now;
                System.out.println("carriers " + carriers);
            }
        }
    }

    static void printCounts() {
        System.out.println("counts " + System.nanoTime() + " sleeps " + SLEEPS.get() + " reads "
                + READS.get() + " contended " + CONTENDED.get() + " inits " + INITS.get()
                + " quick " + QUICK.get());
    }

    /** Kept alive a while, so that collections have survivors to copy. */
    static volatile byte[][] kept = new byte[256][];

    static void churn() {
        byte[][] ring = kept;
        for (int i = 0; ; i++) {
            ring[i & 255] = new byte[8 * 1024];
        }
    }

    static String carrierNames() {
        List<String> names = new ArrayList<>();
        for (Thread t : Thread.getAllStackTraces().keySet()) {
            if (t.getClass().getName().equals("jdk.internal.misc.CarrierThread")) names.add(t.getName());
        }
        java.util.Collections.sort(names);
        return String.join(",", names);
    }

    /** Answers each byte with one, after {@code delayNs}. */
    static void serve(ServerSocket server, long delayNs) {
        try {
            while (true) {
                Socket s = server.accept();
                Thread t = new Thread(() -> {
                    try (s) {
                        InputStream in = s.getInputStream();
                        OutputStream out = s.getOutputStream();
                        while (in.read() >= 0) {
                            Thread.sleep(delayNs / 1_000_000, (int) (delayNs % 1_000_000));
                            out.write(2);
                            out.flush();
                        }
                    } catch (Exception e) {
                        // client gone
                    }
                }, "slow-server-conn");
                t.setDaemon(true);
                t.start();
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** A fresh class every second, needed at once by 4 virtual threads. */
    static void initClasses(ExecutorService vts) {
        String[] names = {"Pinning$Slow1", "Pinning$Slow2", "Pinning$Slow3", "Pinning$Slow4",
            "Pinning$Slow5", "Pinning$Slow6", "Pinning$Slow7", "Pinning$Slow8"};
        try {
            for (String name : names) {
                List<java.util.concurrent.Future<?>> done = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    done.add(vts.submit(() -> {
                        Class.forName(name, true, Pinning.class.getClassLoader());
                        return null;
                    }));
                }
                for (var f : done) f.get();
                INITS.incrementAndGet();
                Thread.sleep(700);
            }
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static void slowInit() {
        try {
            for (int i = 0; i < 20; i++) Thread.sleep(10);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static final class Slow1 { static { slowInit(); } }
    static final class Slow2 { static { slowInit(); } }
    static final class Slow3 { static { slowInit(); } }
    static final class Slow4 { static { slowInit(); } }
    static final class Slow5 { static { slowInit(); } }
    static final class Slow6 { static { slowInit(); } }
    static final class Slow7 { static { slowInit(); } }
    static final class Slow8 { static { slowInit(); } }
}
