import java.security.MessageDigest;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;

/**
 * Virtual threads that compute for a long time without ever unmounting (virtual threads are not
 * time-sliced), then sleep a little: with few carriers each burst holds its carrier for its whole
 * length while the other virtual threads wait. Each burst is printed as it ends, timed with
 * System.nanoTime (CLOCK_MONOTONIC, the kernel's clock):
 * `burst <Thread.threadId> <start ns> <duration ns>`, by the main thread (a virtual thread writing
 * to stdout would block in file I/O, and the pool would add a carrier to make up for it).
 * Arguments: virtual threads (default 2), burst ms (default 200), pause ms (default 50), what a
 * burst computes (default {@code spin}: arithmetic in {@link #crunch}; {@code sha256}: SHA-256
 * digests in {@link #hash}, where the JIT calls the CPU's SHA instructions through a compiler
 * stub, so most samples land in the stub rather than in Java code).
 */
public final class Monopolize {
    static volatile long sink;
    static final ConcurrentLinkedQueue<String> BURSTS = new ConcurrentLinkedQueue<>();

    /** The hot method: computes until `nanos` have passed, never blocking. */
    static long crunch(long nanos) {
        long until = System.nanoTime() + nanos;
        long x = 1;
        while (System.nanoTime() < until) {
            for (int i = 0; i < 1000; i++) {
                x = x * 6364136223846793005L + 1442695040888963407L;
            }
        }
        return x;
    }

    /** The hot method of a request that hashes: SHA-256 over 64 KiB until `nanos` have passed. */
    static long hash(long nanos) throws Exception {
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        byte[] block = new byte[64 * 1024];
        long until = System.nanoTime() + nanos;
        long x = 0;
        while (System.nanoTime() < until) {
            sha.update(block);
            byte[] digest = sha.digest();
            block[(int) (x & 0xffff)] = digest[0];
            x += digest[1];
        }
        return x;
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        long burstMs = args.length > 1 ? Long.parseLong(args[1]) : 200;
        long pauseMs = args.length > 2 ? Long.parseLong(args[2]) : 50;
        boolean sha256 = args.length > 3 && args[3].equals("sha256");
        ExecutorService executor = Vt.executor();
        for (int i = 0; i < threads; i++) {
            executor.submit(() -> {
                long id = Thread.currentThread().getId();
                while (true) {
                    long start = System.nanoTime();
                    sink += sha256 ? hash(burstMs * 1_000_000L) : crunch(burstMs * 1_000_000L);
                    long end = System.nanoTime();
                    BURSTS.add("burst " + id + " " + start + " " + (end - start));
                    Thread.sleep(pauseMs);
                }
            });
        }
        Vt.ready();
        while (true) {
            Thread.sleep(100);
            for (String line; (line = BURSTS.poll()) != null; ) {
                System.out.println(line);
            }
            System.out.flush();
        }
    }
}
