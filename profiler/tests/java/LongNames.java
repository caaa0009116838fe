import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.MethodType;

/**
 * Plain Java that makes a new, distinct stack every few milliseconds, each through a method whose
 * name is as long as a class file allows: threads that each define tiny classes one after the
 * other (`LN0`, `LN1`, ...), every one with a single static method of the same long name that
 * sleeps, and call it once. The JVM shares one Symbol for the name; a profiler that keeps each
 * stack's names grows by the name's length per stack.
 * Arguments: method name length in characters (default 65000; at most 65535), threads (default
 * 2), sleep in ms per call (default 2). Prints "classes <n>" once a second.
 */
public final class LongNames {
    public static void main(String[] args) throws Exception {
        int length = args.length > 0 ? Integer.parseInt(args[0]) : 65_000;
        int threads = args.length > 1 ? Integer.parseInt(args[1]) : 2;
        long sleepMs = args.length > 2 ? Long.parseLong(args[2]) : 2;
        String name = "m".repeat(length);
        MethodHandles.Lookup lookup = MethodHandles.lookup();
        MethodType type = MethodType.methodType(void.class, long.class);
        java.util.concurrent.atomic.AtomicLong defined = new java.util.concurrent.atomic.AtomicLong();
        for (int t = 0; t < threads; t++) {
            int first = t;
            Thread thread = new Thread(() -> {
                try {
                    for (long i = first; ; i += threads) {
                        Class<?> c = lookup.defineClass(classFile("LN" + i, name));
                        MethodHandle m = lookup.findStatic(c, name, type);
                        m.invokeExact(sleepMs);
                        defined.incrementAndGet();
                    }
                } catch (Throwable e) {
                    e.printStackTrace();
                    System.exit(1);
                }
            }, "definer-" + t);
            thread.setDaemon(true);
            thread.start();
        }
        Vt.ready();
        while (true) {
            Thread.sleep(1000);
            System.out.println("classes " + defined.get());
        }
    }

    /** A class `name` with one method `public static void <method>(long ms)` that sleeps. */
    static byte[] classFile(String name, String method) throws IOException {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        DataOutputStream out = new DataOutputStream(bytes);
        out.writeInt(0xCAFEBABE);
        out.writeShort(0);
        out.writeShort(61); // Java 17
        out.writeShort(13); // constant pool count: entries 1..12
        utf8(out, name); // 1
        classRef(out, 1); // 2
        utf8(out, "java/lang/Object"); // 3
        classRef(out, 3); // 4
        utf8(out, method); // 5
        utf8(out, "(J)V"); // 6
        utf8(out, "Code"); // 7
        utf8(out, "java/lang/Thread"); // 8
        classRef(out, 8); // 9
        utf8(out, "sleep"); // 10
        out.writeByte(12); // 11: NameAndType sleep (J)V
        out.writeShort(10);
        out.writeShort(6);
        out.writeByte(10); // 12: Methodref Thread.sleep(J)V
        out.writeShort(9);
        out.writeShort(11);
        out.writeShort(0x0021); // public super
        out.writeShort(2); // this
        out.writeShort(4); // super
        out.writeShort(0); // interfaces
        out.writeShort(0); // fields
        out.writeShort(1); // methods
        out.writeShort(0x0009); // public static
        out.writeShort(5);
        out.writeShort(6);
        out.writeShort(1); // attributes: Code
        out.writeShort(7);
        byte[] code = {0x1e, (byte) 0xb8, 0, 12, (byte) 0xb1}; // lload_0; invokestatic #12; return
        out.writeInt(2 + 2 + 4 + code.length + 2 + 2);
        out.writeShort(2); // max stack
        out.writeShort(2); // max locals
        out.writeInt(code.length);
        out.write(code);
        out.writeShort(0); // exception table
        out.writeShort(0); // attributes
        out.writeShort(0); // class attributes
        out.flush();
        return bytes.toByteArray();
    }

    static void utf8(DataOutputStream out, String text) throws IOException {
        out.writeByte(1);
        out.writeUTF(text);
    }

    static void classRef(DataOutputStream out, int nameIndex) throws IOException {
        out.writeByte(7);
        out.writeShort(nameIndex);
    }
}
