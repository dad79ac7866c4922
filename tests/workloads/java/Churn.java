// Deoptimization and class unloading under load, the two ways a Java frame's code or method can go
// away between a sample and its naming.
//
// In rounds of about 40 ms the main thread loads `WorkerA` and `WorkerB` afresh, each through a new
// class loader (the same class file, a new class every time), and runs each for about 20 ms: its
// `run` loop is JIT-compiled (on-stack replacement) with a branch it never took pruned, then takes
// that branch, which deoptimizes the compiled code (an uncommon trap). Every tenth round drops the
// loaders and asks for a GC, which unloads the classes and frees their methods and compiled code,
// whose memory later classes reuse.
//
// Expected stacks: `Churn.main` -> `Churn.round` -> `WorkerA.run` -> `WorkerA.alpha` or
// `WorkerA.rare` (and the same for `WorkerB` with `beta`). A frame of one worker's method is never
// under the other worker's `run`.
//
// Usage: java -cp DIR Churn SECONDS [WARMUP_SECONDS] [eof] (see Control); prints "ready" after the warm-up and
// "rounds N" at the end.
import java.io.IOException;
import java.io.InputStream;

public final class Churn {
    /// Loads one class from the class path's bytes, as a class of its own.
    static final class Fresh extends ClassLoader {
        Fresh() {
            super(Churn.class.getClassLoader());
        }

        Class<?> load(String name, byte[] bytes) {
            return defineClass(name, bytes, 0, bytes.length);
        }
    }

    static byte[] bytes(String name) throws IOException {
        try (InputStream in = Churn.class.getResourceAsStream(name + ".class")) {
            return in.readAllBytes();
        }
    }

    static void round(byte[] a, byte[] b) throws Exception {
        Runnable workerA = (Runnable) new Fresh().load("WorkerA", a).getDeclaredConstructor().newInstance();
        workerA.run();
        Runnable workerB = (Runnable) new Fresh().load("WorkerB", b).getDeclaredConstructor().newInstance();
        workerB.run();
    }

    public static void main(String[] args) throws Exception {
        double seconds = Double.parseDouble(args[0]);
        double warmup = args.length > 1 && !args[1].equals("eof") ? Double.parseDouble(args[1]) : 0;
        Control.watch(args);
        byte[] a = bytes("WorkerA");
        byte[] b = bytes("WorkerB");
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
            round(a, b);
            if (++rounds % 10 == 0) {
                System.gc();
            }
        }
        System.out.println("rounds " + rounds);
    }
}
