import java.util.concurrent.locks.ReentrantLock;

/**
 * Two plain deadlocks between platform threads, formed at once and kept to the end: "alpha"
 * holds the {@code Left} monitor and waits for {@code Right}, which "beta" holds while it
 * waits for {@code Left}; "gamma" and "delta" do the same with two ReentrantLocks. The JVM's
 * own thread dump reports both ("Found 2 deadlocks").
 */
public final class Deadlock {
    static final class Left {}

    static final class Right {}

    static final Left LEFT = new Left();
    static final Right RIGHT = new Right();
    static final ReentrantLock FIRST = new ReentrantLock();
    static final ReentrantLock SECOND = new ReentrantLock();

    static void both(Object a, Object b) {
        synchronized (a) {
            pause();
            synchronized (b) {
                System.out.println("never");
            }
        }
    }

    static void both(ReentrantLock a, ReentrantLock b) {
        a.lock();
        try {
            pause();
            b.lock();
            b.unlock();
        } finally {
            a.unlock();
        }
    }

    static void pause() {
        try {
            Thread.sleep(200);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static Thread start(String name, Runnable r) {
        Thread t = new Thread(r, name);
        t.setDaemon(true);
        t.start();
        return t;
    }

    public static void main(String[] args) throws Exception {
        start("alpha", () -> both(LEFT, RIGHT));
        start("beta", () -> both(RIGHT, LEFT));
        start("gamma", () -> both(FIRST, SECOND));
        start("delta", () -> both(SECOND, FIRST));
        Thread.sleep(500);
        Vt.ready();
        while (true) {
            Thread.sleep(1000);
        }
    }
}
