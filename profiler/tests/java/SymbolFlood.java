import java.io.BufferedOutputStream;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.MappedByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.FileTime;
import java.util.ArrayList;
import java.util.List;

/**
 * The demo shop, whose owner then makes a profiler's symbol inputs large: told
 * "flood MAPPINGS MIB" on stdin, it maps one page of a file with a path of about 3,800
 * characters MAPPINGS times (each its own line in /proc/PID/maps: same file, same offset, so the
 * kernel cannot merge them), writes a perf map of MIB MiB at /tmp/perf-PID.map and touches it
 * every second from then on. Plain Java: FileChannel.map, no native code. Prints
 * "flooded MAPPINGS BYTES" when done.
 */
public final class SymbolFlood {
    /** Kept so that the collector never unmaps them. */
    static final List<MappedByteBuffer> MAPPED = new ArrayList<>();

    public static void main(String[] args) throws Exception {
        Thread shop = new Thread(() -> {
            try {
                Demo.main(new String[0]);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, "shop");
        shop.setDaemon(true);
        shop.start();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String line; (line = in.readLine()) != null; ) {
            String[] words = line.trim().split(" ");
            if (words.length == 3 && words[0].equals("flood")) {
                int mappings = Integer.parseInt(words[1]);
                long bytes = Long.parseLong(words[2]) << 20;
                map(mappings);
                Path perfMap = Paths.get("/tmp/perf-" + ProcessHandle.current().pid() + ".map");
                writePerfMap(perfMap, bytes);
                touchEverySecond(perfMap);
                System.out.println("flooded " + MAPPED.size() + " " + Files.size(perfMap));
                System.out.flush();
            }
        }
        Thread.sleep(Long.MAX_VALUE);
    }

    /** A page of one file under 15 directories of 250 characters, mapped `count` times. */
    static void map(int count) throws Exception {
        Path dir = Paths.get("").toAbsolutePath();
        for (int i = 0; i < 15; i++) {
            dir = dir.resolve(String.valueOf((char) ('a' + i)).repeat(250));
        }
        Files.createDirectories(dir);
        Path file = dir.resolve("page");
        Files.write(file, new byte[4096]);
        try (FileChannel channel = FileChannel.open(file, StandardOpenOption.READ)) {
            for (int i = 0; i < count; i++) {
                MAPPED.add(channel.map(FileChannel.MapMode.READ_ONLY, 0, 4096));
            }
        }
    }

    /** Well-formed lines (`start size name`), about 60 bytes each, to `bytes`. */
    static void writePerfMap(Path path, long bytes) throws Exception {
        long written = 0;
        long start = 0x100000000L;
        try (OutputStream out = new BufferedOutputStream(Files.newOutputStream(path), 1 << 20)) {
            for (long i = 0; written < bytes; i++) {
                String line = Long.toHexString(start) + " 40 Lflood/Class" + i + ";method" + i
                        + "(JI)V\n";
                byte[] b = line.getBytes(StandardCharsets.US_ASCII);
                int n = (int) Math.min(b.length, bytes - written);
                out.write(b, 0, n);
                written += n;
                start += 0x40;
            }
        }
    }

    static void touchEverySecond(Path path) {
        Thread toucher = new Thread(() -> {
            while (true) {
                try {
                    Thread.sleep(1000);
                    Files.setLastModifiedTime(path, FileTime.fromMillis(System.currentTimeMillis()));
                } catch (Exception e) {
                    return;
                }
            }
        }, "toucher");
        toucher.setDaemon(true);
        toucher.start();
    }
}
