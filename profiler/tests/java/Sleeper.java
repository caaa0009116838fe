/**
 * One platform thread named "sleeper" that, every period, spins for part of it and sleeps for the
 * rest. Each sleep is printed as "slept <start> <end>" in System.nanoTime (CLOCK_MONOTONIC on
 * Linux, the clock of the kernel's events), so a test can sum exactly what it slept in a window.
 * Arguments: sleep fraction (default 0.5), period in ms (default 100), delay in ms before the
 * sleeper thread is born (default 0: at once).
 */
public final class Sleeper {
    public static void main(String[] args) throws Exception {
        double fraction = args.length > 0 ? Double.parseDouble(args[0]) : 0.5;
        long periodMs = args.length > 1 ? Long.parseLong(args[1]) : 100;
        long sleepMs = Math.round(periodMs * fraction);
        long spinNs = (periodMs - sleepMs) * 1_000_000L;
        long delayMs = args.length > 2 ? Long.parseLong(args[2]) : 0;
        Thread sleeper = new Thread(() -> {
            try {
                while (true) {
                    Vt.spin(spinNs);
                    long start = System.nanoTime();
                    Thread.sleep(sleepMs);
                    long end = System.nanoTime();
                    System.out.println("slept " + start + " " + end);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "sleeper");
        Vt.ready();
        Thread.sleep(delayMs);
        sleeper.start();
        sleeper.join();
    }
}
