import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;

/**
 * A platform thread named {@code syncer} that writes a file and forces it to disk, for the
 * system-call tests. Args: the file, how many syncs. Prints {@code ready <pid>}, waits for a
 * line {@code go} on stdin, then writes 4 KiB and calls {@code FileChannel.force(true)}
 * (fsync) that many times, 20 ms apart, and prints {@code synced <n>}; then idles until killed,
 * the file still open.
 */
public final class FileSync {
    public static void main(String[] args) throws Exception {
        Path file = Path.of(args[0]);
        int count = Integer.parseInt(args[1]);
        Vt.ready();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        String line;
        while ((line = in.readLine()) != null && !line.equals("go")) {}
        Thread syncer = new Thread(() -> {
            try (FileChannel channel = FileChannel.open(file, StandardOpenOption.CREATE,
                    StandardOpenOption.WRITE, StandardOpenOption.TRUNCATE_EXISTING)) {
                ByteBuffer block = ByteBuffer.allocate(4096);
                for (int i = 0; i < count; i++) {
                    block.clear();
                    channel.write(block);
                    channel.force(true);
                    Thread.sleep(20);
                }
                System.out.println("synced " + count);
                System.out.flush();
                // Kept open: the descriptor is named from /proc while it is.
                Thread.sleep(Long.MAX_VALUE);
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        }, "syncer");
        syncer.start();
        syncer.join();
    }
}
