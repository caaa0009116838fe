import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;

/**
 * Work waiting for a carrier. As many virtual threads as there are carriers each run a class
 * initializer that sleeps (a virtual thread cannot unmount inside {@code <clinit>}, on JDK 21
 * and 25 alike), so every carrier is pinned. Meanwhile the main thread starts a known number
 * of virtual threads: they wait in the scheduler's queues until the initializers end.
 * Prints {@code submitted N <nanoTime>} once all N are started, {@code ran N <nanoTime>} once
 * all have run, then idles.
 * Arguments: carriers (default 4, at most 8), tasks (default 1000), stall ms (default 2000).
 */
public final class Backlog {
    static long stallMs = 2000;
    static final CountDownLatch STALLING = new CountDownLatch(8);

    static void stall() {
        STALLING.countDown();
        try {
            Thread.sleep(stallMs);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static final class Stall0 { static { stall(); } static void touch() {} }
    static final class Stall1 { static { stall(); } static void touch() {} }
    static final class Stall2 { static { stall(); } static void touch() {} }
    static final class Stall3 { static { stall(); } static void touch() {} }
    static final class Stall4 { static { stall(); } static void touch() {} }
    static final class Stall5 { static { stall(); } static void touch() {} }
    static final class Stall6 { static { stall(); } static void touch() {} }
    static final class Stall7 { static { stall(); } static void touch() {} }

    public static void main(String[] args) throws Exception {
        int carriers = args.length > 0 ? Integer.parseInt(args[0]) : 4;
        int tasks = args.length > 1 ? Integer.parseInt(args[1]) : 1000;
        stallMs = args.length > 2 ? Long.parseLong(args[2]) : 2000;
        if (carriers < 1 || carriers > 8) throw new IllegalArgumentException("carriers: 1 to 8");
        Runnable[] stalls = {
            Stall0::touch, Stall1::touch, Stall2::touch, Stall3::touch,
            Stall4::touch, Stall5::touch, Stall6::touch, Stall7::touch,
        };
        ExecutorService vts = Vt.executor();
        Vt.ready();
        // Given time to attach: the tests say go.
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        for (int i = 0; i < carriers; i++) vts.submit(stalls[i]);
        for (int i = carriers; i < 8; i++) STALLING.countDown();
        STALLING.await();
        Thread.sleep(100);
        CountDownLatch ran = new CountDownLatch(tasks);
        for (int i = 0; i < tasks; i++) vts.submit(ran::countDown);
        System.out.println("submitted " + tasks + " " + System.nanoTime());
        System.out.flush();
        ran.await();
        System.out.println("ran " + tasks + " " + System.nanoTime());
        System.out.flush();
        while (true) Thread.sleep(1000);
    }
}
