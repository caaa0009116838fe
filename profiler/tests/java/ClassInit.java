import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;

/**
 * Class initialization and class monitors for the class-init tests, chosen by the arguments:
 * <ul>
 * <li>{@code init}: at each line {@code init N} on standard input (N from 1 to 6), 4 virtual
 *     threads call a static method of class {@code ClassInit$FmtN}, whose static initializer
 *     sleeps 2 s: the first runs it, the others wait for it (pinned on 21 and 25). The
 *     initializer prints {@code clinit <class> <start nanoTime> <end nanoTime> vthread <id>
 *     carrier <name>} as it ends, and {@code done N} follows once all 4 are through;</li>
 * <li>{@code static}: a platform thread {@code registry-holder} holds the monitor of class
 *     {@code ClassInit$Registry} (a {@code static synchronized} method) 40 ms at a time, while
 *     2 virtual threads and a platform thread {@code registry-waiter} try to enter it.</li>
 * </ul>
 * Prints {@code ready <pid>} first.
 */
public final class ClassInit {
    static final long INIT_MS = 2000;

    /** Runs in a static initializer: sleeps, then says who ran it and when. */
    static void slowInit(String name) {
        long start = System.nanoTime();
        try {
            Thread.sleep(INIT_MS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        Thread me = Thread.currentThread();
        // "VirtualThread[#23]/runnable@ForkJoinPool-1-worker-1": the carrier follows '@'.
        String text = me.toString();
        String carrier = text.contains("@") ? text.substring(text.indexOf('@') + 1) : me.getName();
        System.out.println("clinit " + name + " " + start + " " + System.nanoTime() + " vthread "
                + me.getId() + " carrier " + carrier);
        System.out.flush();
    }

    static final class Fmt1 { static { slowInit("ClassInit$Fmt1"); } static void use() {} }
    static final class Fmt2 { static { slowInit("ClassInit$Fmt2"); } static void use() {} }
    static final class Fmt3 { static { slowInit("ClassInit$Fmt3"); } static void use() {} }
    static final class Fmt4 { static { slowInit("ClassInit$Fmt4"); } static void use() {} }
    static final class Fmt5 { static { slowInit("ClassInit$Fmt5"); } static void use() {} }
    static final class Fmt6 { static { slowInit("ClassInit$Fmt6"); } static void use() {} }

    /** A plain invokestatic in the caller's bytecode, as an application would write it. */
    static void use(int i) {
        switch (i) {
            case 1: Fmt1.use(); break;
            case 2: Fmt2.use(); break;
            case 3: Fmt3.use(); break;
            case 4: Fmt4.use(); break;
            case 5: Fmt5.use(); break;
            default: Fmt6.use(); break;
        }
    }

    static final class Registry {
        static volatile boolean held;

        static synchronized void hold() {
            held = true;
            Vt.spin(40_000_000);
            held = false;
        }

        static synchronized void lookup() {}
    }

    public static void main(String[] args) throws Exception {
        List<String> modes = List.of(args);
        ExecutorService vts = Vt.executor();
        if (modes.contains("static")) {
            Thread holder = new Thread(() -> {
                while (true) {
                    Registry.hold();
                    sleep(5);
                }
            }, "registry-holder");
            holder.setDaemon(true);
            holder.start();
            Runnable waiter = () -> {
                while (true) {
                    sleep(13);
                    Registry.lookup();
                }
            };
            for (int i = 0; i < 2; i++) vts.submit(waiter);
            Thread platform = new Thread(waiter, "registry-waiter");
            platform.setDaemon(true);
            platform.start();
        }
        if (modes.contains("init")) {
            // Every carrier started before the test attaches: 4 tasks at once, spinning.
            List<Future<?>> warm = new ArrayList<>();
            for (int i = 0; i < 4; i++) warm.add(vts.submit(() -> Vt.spin(200_000_000)));
            for (Future<?> f : warm) f.get();
        }
        Vt.ready();
        if (modes.contains("init")) {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
            for (String line; (line = in.readLine()) != null; ) {
                if (!line.startsWith("init ")) continue;
                int which = Integer.parseInt(line.substring(5).trim());
                List<Future<?>> done = new ArrayList<>();
                for (int i = 0; i < 4; i++) {
                    done.add(vts.submit(() -> use(which)));
                }
                for (Future<?> f : done) f.get();
                System.out.println("done " + which);
                System.out.flush();
            }
        }
        Thread.sleep(Long.MAX_VALUE);
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
