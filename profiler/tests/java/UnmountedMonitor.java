import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.ConcurrentLinkedQueue;

/**
 * Virtual threads contending on one monitor around a blocking call: each enters
 * {@code UnmountedMonitor$Ledger.append} ({@code synchronized}) and sleeps 15 ms inside it. On
 * JDK 24+ (JEP 491) neither the holder's sleep nor the others' waits to enter pin a carrier:
 * they all wait unmounted. On JDK 21 every one of them pins.
 *
 * <p>Each thread times every entry (System.nanoTime, from the call to the first statement
 * inside). On "report" on standard input it prints {@code wait <start> <end>} for each entry,
 * then {@code done}. Arguments: threads (default 8), hold ms (15).
 */
public final class UnmountedMonitor {
    static final ConcurrentLinkedQueue<long[]> WAITS = new ConcurrentLinkedQueue<>();

    static final class Ledger {
        private long entries;

        synchronized void append(long start, long holdMs) throws InterruptedException {
            WAITS.add(new long[] {start, System.nanoTime()});
            entries++;
            Thread.sleep(holdMs);
        }
    }

    public static void main(String[] args) throws Exception {
        int threads = args.length > 0 ? Integer.parseInt(args[0]) : 8;
        long holdMs = args.length > 1 ? Long.parseLong(args[1]) : 15;
        Ledger ledger = new Ledger();
        var executor = Vt.executor();
        for (int i = 0; i < threads; i++) {
            executor.submit(() -> {
                while (true) {
                    ledger.append(System.nanoTime(), holdMs);
                    Thread.sleep(5);
                }
            });
        }
        Vt.ready();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            if (line.equals("report")) {
                StringBuilder out = new StringBuilder();
                for (long[] w : WAITS) out.append("wait ").append(w[0]).append(' ').append(w[1]).append('\n');
                out.append("done");
                System.out.println(out);
                System.out.flush();
            }
        }
    }
}
