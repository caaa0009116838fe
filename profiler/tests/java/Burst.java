import java.io.BufferedReader;
import java.io.InputStreamReader;

/**
 * Idle until told, then busy: for each line {@code burst <ms> <threads>} on stdin, that many
 * platform threads spin for {@code ms} of wall-clock time; once all have ended it prints
 * {@code burst-done <start> <end>} (System.nanoTime). Between bursts nothing runs but the
 * JVM's own threads. A test puts it in a cgroup with a small CPU quota: the bursts are what
 * the quota throttles.
 */
public final class Burst {
    public static void main(String[] args) throws Exception {
        Vt.ready();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null) {
            String[] words = line.trim().split("\\s+");
            if (words.length != 3 || !words[0].equals("burst")) continue;
            long ms = Long.parseLong(words[1]);
            int n = Integer.parseInt(words[2]);
            long start = System.nanoTime();
            long until = start + ms * 1_000_000L;
            Thread[] threads = new Thread[n];
            for (int i = 0; i < n; i++) {
                threads[i] = new Thread(() -> Vt.spin(until - System.nanoTime()), "burst-" + i);
                threads[i].start();
            }
            for (Thread t : threads) t.join();
            System.out.println("burst-done " + start + " " + System.nanoTime());
            System.out.flush();
        }
    }
}
