import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.locks.ReentrantLock;

/**
 * Two virtual threads deadlock on two ReentrantLocks, each waiting unmounted for the lock the
 * other holds ({@code UnmountedDeadlock.transfer}): no OS thread blocks, no carrier pins.
 * They start on "go" on standard input; it prints {@code deadlocked <threadId> <threadId>}
 * once both hold their first lock and have asked for the second.
 */
public final class UnmountedDeadlock {
    static void transfer(ReentrantLock first, ReentrantLock second) {
        first.lock();
        try {
            sleep(200);
            second.lock();
            second.unlock();
        } finally {
            first.unlock();
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            throw new IllegalStateException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        Vt.ready();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        ReentrantLock checking = new ReentrantLock();
        ReentrantLock savings = new ReentrantLock();
        long[] ids = new long[2];
        var executor = Vt.executor();
        executor.submit(() -> {
            ids[0] = Thread.currentThread().getId();
            transfer(checking, savings);
        });
        executor.submit(() -> {
            ids[1] = Thread.currentThread().getId();
            transfer(savings, checking);
        });
        Thread.sleep(400);
        System.out.println("deadlocked " + ids[0] + " " + ids[1]);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
