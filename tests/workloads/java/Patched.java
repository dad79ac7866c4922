// Compiled code deoptimized while a frame of it waits on the stack: the frame's return address is
// patched to the code's deoptimization handler until its callee returns, the case a walker must
// step through with the original pc the JVM kept in the frame.
//
// In rounds of about 50 ms the main thread loads `PatchedShape`, `PatchedSquare` and `PatchedCaller`
// afresh through a new class loader and calls `PatchedCaller.caller` thousands of times with a
// callee that returns at once, until the JIT has compiled `caller` with `PatchedSquare.step` inlined
// on the strength of the class hierarchy (the only shape loaded). Then one call's callee loads
// `PatchedCircle`, a second shape, which invalidates that compiled code: the JVM patches the waiting
// `caller` frame, and the callee burns for 30 ms beneath it. Every tenth round asks for a GC, which
// unloads the old rounds' classes.
//
// Expected stacks: `Patched.main` -> `PatchedCaller.applyAsLong` -> `PatchedCaller.caller` ->
// `PatchedCaller.callee` (the patched frame is `caller`). Run `callee` with
// `-XX:CompileCommand=dontinline,PatchedCaller::callee` so it keeps a frame of its own.
//
// Usage: java -cp DIR Patched SECONDS [WARMUP_SECONDS] [eof] (see Control); prints "ready" after the
// warm-up and "rounds N" at the end.
import java.io.IOException;
import java.io.InputStream;
import java.util.Set;
import java.util.function.LongUnaryOperator;

public final class Patched {
    /// Defines the named classes itself (child first), from the class path's bytes.
    static final class Fresh extends ClassLoader {
        private final Set<String> own;

        Fresh(ClassLoader parent, Set<String> own) {
            super(parent);
            this.own = own;
        }

        @Override
        protected Class<?> loadClass(String name, boolean resolve) throws ClassNotFoundException {
            synchronized (getClassLoadingLock(name)) {
                Class<?> c = findLoadedClass(name);
                if (c == null && own.contains(name)) {
                    byte[] b = bytes(name);
                    c = defineClass(name, b, 0, b.length);
                }
                return c != null ? c : super.loadClass(name, resolve);
            }
        }
    }

    static byte[] bytes(String name) throws ClassNotFoundException {
        try (InputStream in = Patched.class.getResourceAsStream(name + ".class")) {
            return in.readAllBytes();
        } catch (IOException | NullPointerException e) {
            throw new ClassNotFoundException(name, e);
        }
    }

    static final Set<String> ROUND = Set.of("PatchedShape", "PatchedSquare", "PatchedCaller");

    /// Loads `PatchedCircle` beside the round's classes (called by the callee, the caller waiting).
    public static void loadCircle(ClassLoader round) {
        try {
            new Fresh(round, Set.of("PatchedCircle")).loadClass("PatchedCircle").getDeclaredConstructor().newInstance();
        } catch (ReflectiveOperationException e) {
            throw new IllegalStateException(e);
        }
    }

    static long round() throws Exception {
        Fresh loader = new Fresh(Patched.class.getClassLoader(), ROUND);
        LongUnaryOperator caller = (LongUnaryOperator) loader.loadClass("PatchedCaller").getDeclaredConstructor().newInstance();
        long x = 0;
        // Warm: enough calls for the JIT to compile `caller` (tier 3 after 200 invocations).
        long warm = System.nanoTime() + 15_000_000L;
        while (System.nanoTime() < warm) {
            for (int i = 0; i < 1000; i++) {
                x += caller.applyAsLong(0);
            }
        }
        // The patched call: a second shape loaded, then a 30 ms burn under the waiting frame.
        return x + caller.applyAsLong(30_000_000L);
    }

    public static long sink;

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        double warmup = args.length > 1 && !args[1].equals("eof") ? Double.parseDouble(args[1]) : 0;
        Control.watch(args);
        long warmEnd = System.nanoTime() + (long) (warmup * 1e9);
        long end = warmEnd + (long) (seconds * 1e9);
        boolean ready = false;
        long rounds = 0;
        while (!Control.over(end)) {
            if (!ready && System.nanoTime() >= warmEnd) {
                System.out.println("ready");
                System.out.flush();
                ready = true;
            }
            sink += round();
            if (++rounds % 10 == 0) {
                System.gc();
            }
        }
        System.out.println("rounds " + rounds);
    }
}
