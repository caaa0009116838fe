import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.SynchronousQueue;

/**
 * A high-switch load for the benchmark's offline part: pairs of threads hand a token back and
 * forth through a SynchronousQueue, so the carriers (or the platform threads) park and wake
 * tens of thousands of times a second and a recording of a few seconds holds a million events.
 * Eight virtual threads sleep 1 ms in a loop beside them, so the carriers park and wake too.
 * Arguments: pairs (default 2), "platform" (default) or "virtual" threads for the pairs.
 */
public final class Handoff {
    public static void main(String[] args) throws Exception {
        int pairs = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        boolean virtual = args.length > 1 && args[1].equals("virtual");
        ExecutorService executor = virtual ? Vt.executor() : Executors.newCachedThreadPool();
        for (int i = 0; i < pairs; i++) {
            SynchronousQueue<Integer> ping = new SynchronousQueue<>();
            SynchronousQueue<Integer> pong = new SynchronousQueue<>();
            executor.submit(() -> {
                while (true) {
                    ping.put(1);
                    pong.take();
                }
            });
            executor.submit(() -> {
                while (true) {
                    ping.take();
                    pong.put(1);
                }
            });
        }
        ExecutorService sleepers = Vt.executor();
        for (int i = 0; i < 8; i++) {
            sleepers.submit(() -> {
                while (true) {
                    Thread.sleep(1);
                }
            });
        }
        Vt.ready();
        Thread.sleep(Long.MAX_VALUE);
    }
}
