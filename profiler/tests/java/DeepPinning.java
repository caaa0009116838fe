import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;

/**
 * Pinned stacks about 40 frames deep: each cause recurses 20 frames down to a
 * {@code synchronized} method, which recurses 20 more before it blocks. The causes planted:
 * <ul>
 * <li>{@code DeepPinning$Ledger.append} sleeps 10 ms (pins on JDK 21);</li>
 * <li>{@code DeepPinning$PriceCache.refresh} reads a line from a socket through a
 *     {@code BufferedReader}; the server answers after 15 ms (pins on JDK 21);</li>
 * <li>{@code DeepPinning$Registry.register}, called from the static initializer of
 *     {@code DeepPinning$Catalog}, sleeps 10 ms 300 times (a class initializer on the stack
 *     pins on 21 and 25).</li>
 * </ul>
 * Prints {@code ready <pid>}, then {@code cause <synchronized method>} for each cause that
 * pins on this JDK.
 */
public final class DeepPinning {
    static final int DEPTH = 20;

    static final class Ledger {
        synchronized void append() throws Exception {
            deeper(DEPTH, () -> Thread.sleep(10));
        }
    }

    static final class PriceCache {
        final BufferedReader in;
        final OutputStream out;

        PriceCache(Socket s) throws Exception {
            in = new BufferedReader(new InputStreamReader(s.getInputStream()));
            out = s.getOutputStream();
        }

        synchronized void refresh() throws Exception {
            deeper(DEPTH, () -> {
                out.write('\n');
                out.flush();
                if (in.readLine() == null) throw new IllegalStateException("server closed");
            });
        }
    }

    static final class Registry {
        static synchronized void register() throws Exception {
            deeper(DEPTH, () -> Thread.sleep(10));
        }
    }

    static final class Catalog {
        static {
            try {
                for (int i = 0; i < 300; i++) {
                    down(DEPTH, Registry::register);
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }

        static void touch() {}
    }

    interface Step {
        void run() throws Exception;
    }

    static void down(int n, Step step) throws Exception {
        if (n == 0) {
            step.run();
        } else {
            down(n - 1, step);
        }
    }

    static void deeper(int n, Step step) throws Exception {
        if (n == 0) {
            step.run();
        } else {
            deeper(n - 1, step);
        }
    }

    public static void main(String[] args) throws Exception {
        boolean monitorsPin = Runtime.version().feature() < 24;
        ServerSocket server = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
        Thread acceptor = new Thread(() -> {
            while (true) {
                try {
                    Socket s = server.accept();
                    Thread t = new Thread(() -> {
                        try (s) {
                            BufferedReader in =
                                new BufferedReader(new InputStreamReader(s.getInputStream()));
                            while (in.readLine() != null) {
                                Thread.sleep(15);
                                s.getOutputStream().write("42\n".getBytes());
                                s.getOutputStream().flush();
                            }
                        } catch (Exception e) {
                            // the client went away
                        }
                    }, "server-conn");
                    t.setDaemon(true);
                    t.start();
                } catch (Exception e) {
                    return;
                }
            }
        }, "server");
        acceptor.setDaemon(true);
        acceptor.start();

        ExecutorService vts = Vt.executor();
        List<String> causes = new ArrayList<>();
        Ledger ledger = new Ledger();
        vts.submit(() -> {
            while (true) {
                down(DEPTH, ledger::append);
            }
        });
        PriceCache cache =
            new PriceCache(new Socket(InetAddress.getLoopbackAddress(), server.getLocalPort()));
        vts.submit(() -> {
            while (true) {
                down(DEPTH, cache::refresh);
            }
        });
        if (monitorsPin) {
            causes.add("DeepPinning$Ledger.append");
            causes.add("DeepPinning$PriceCache.refresh");
        }
        Vt.ready();
        // The class initializer starts once the recording may have begun.
        Thread.sleep(1000);
        vts.submit(() -> {
            Catalog.touch();
            return null;
        });
        causes.add("DeepPinning$Registry.register");
        for (String c : causes) System.out.println("cause " + c);
        System.out.flush();
        Thread.sleep(Long.MAX_VALUE);
    }
}
