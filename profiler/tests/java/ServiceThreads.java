import java.io.InputStream;
import java.io.OutputStream;
import java.lang.ref.Cleaner;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.ReentrantLock;

/**
 * The JDK's own threads waiting for work next to an application lock with real contention.
 * <ul>
 * <li>Virtual threads call a local server over a new socket each time (the server answers
 *     after 10 ms): the socket poller threads wait for readiness and wake the readers, and
 *     every socket is registered with the JDK's common cleaner. On JDK 21 one more virtual
 *     thread reads its socket inside {@code synchronized}, pinning its carrier, which the
 *     poller wakes.</li>
 * <li>Objects registered with a {@link Cleaner} of the workload's own (an
 *     {@code InnocuousThread} of the JDK's), and a {@code System.gc()} every 300 ms, so the
 *     reference handler and the cleaners have work now and then.</li>
 * <li>Virtual threads sleeping 5 ms in a loop (the JDK's timer for them: the unparker on 21,
 *     the pool's delay scheduler on 25).</li>
 * <li>The application's lock: after "go" on standard input, 3 platform threads
 *     {@code teller-<i>} take turns on one fair {@code ReentrantLock}
 *     ({@code ServiceThreads$Vault.deposit}), each holding it 12 ms, 40 times each.</li>
 * </ul>
 * Prints {@code ready <pid>}; after the tellers are done, {@code contended <n> waited_ns <t>
 * long <n>} (acquisitions that found the lock held, their wait in all, and how many of them
 * waited 2 ms or more), then {@code done}.
 */
public final class ServiceThreads {
    static final Cleaner CLEANER = Cleaner.create();
    static final AtomicLong CLEANED = new AtomicLong();

    static final class Vault {
        final ReentrantLock lock = new ReentrantLock(true);
        final AtomicLong contended = new AtomicLong();
        final AtomicLong waitedNs = new AtomicLong();
        final AtomicLong longWaits = new AtomicLong();
        long balance;

        void deposit() throws InterruptedException {
            long t0 = System.nanoTime();
            if (!lock.tryLock()) {
                lock.lock();
                long waited = System.nanoTime() - t0;
                contended.incrementAndGet();
                waitedNs.addAndGet(waited);
                if (waited >= 2_000_000) longWaits.incrementAndGet();
            }
            try {
                balance++;
                Thread.sleep(12);
            } finally {
                lock.unlock();
            }
        }
    }

    /** A connection read inside synchronized: pins its carrier on JDK 21. */
    static final class Pinned {
        synchronized void call(int port) throws Exception {
            ServiceThreads.call(port);
        }
    }

    static void call(int port) throws Exception {
        try (Socket s = new Socket(InetAddress.getLoopbackAddress(), port)) {
            OutputStream out = s.getOutputStream();
            InputStream in = s.getInputStream();
            out.write(1);
            out.flush();
            if (in.read() < 0) throw new IllegalStateException("server closed");
        }
    }

    public static void main(String[] args) throws Exception {
        ServerSocket server = new ServerSocket(0, 200, InetAddress.getLoopbackAddress());
        int port = server.getLocalPort();
        // A few server threads, each answering one connection at a time.
        for (int i = 0; i < 4; i++) {
            Thread t = new Thread(() -> {
                while (true) {
                    try (Socket s = server.accept()) {
                        if (s.getInputStream().read() < 0) continue;
                        Thread.sleep(10);
                        s.getOutputStream().write(2);
                        s.getOutputStream().flush();
                    } catch (Exception e) {
                        // the client went away
                    }
                }
            }, "server-" + i);
            t.setDaemon(true);
            t.start();
        }

        ExecutorService vts = Vt.executor();
        for (int i = 0; i < 2; i++) {
            vts.submit(() -> {
                while (true) {
                    call(port);
                }
            });
        }
        if (Runtime.version().feature() < 24) {
            Pinned pinned = new Pinned();
            vts.submit(() -> {
                while (true) {
                    pinned.call(port);
                }
            });
        }
        for (int i = 0; i < 2; i++) {
            vts.submit(() -> {
                while (true) {
                    Thread.sleep(5);
                }
            });
        }
        Thread gc = new Thread(() -> {
            while (true) {
                for (int i = 0; i < 100; i++) {
                    CLEANER.register(new Object(), CLEANED::incrementAndGet);
                }
                System.gc();
                try {
                    Thread.sleep(300);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "collector");
        gc.setDaemon(true);
        gc.start();

        Vt.ready();
        java.io.BufferedReader stdin =
            new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
        while (!"go".equals(stdin.readLine())) {
            // wait for the recording
        }
        Vault vault = new Vault();
        Thread[] tellers = new Thread[3];
        for (int i = 0; i < tellers.length; i++) {
            tellers[i] = new Thread(() -> {
                try {
                    for (int n = 0; n < 40; n++) {
                        vault.deposit();
                        Vt.spin(200_000);
                    }
                } catch (InterruptedException e) {
                    // stop
                }
            }, "teller-" + i);
            tellers[i].start();
        }
        for (Thread t : tellers) t.join();
        System.out.println("contended " + vault.contended.get() + " waited_ns "
            + vault.waitedNs.get() + " long " + vault.longWaits.get());
        System.out.println("done");
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
