// A Java recursion DEPTH deep with the CPU time at the bottom: past perf's 127 frames, as javac's
// attribution visitor recurses on deep syntax trees.
//
// Expected stack (leaf first): `Recursion.bottom` -> `Recursion.recurse` x (DEPTH + 1) ->
// `Recursion.main`. C2 may inline a level of the recursion into another; sonde names inlined
// methods as frames of their own, so every level shows either way.
//
// Usage: java -cp DIR Recursion SECONDS DEPTH [eof] (see Control)
// After a warm-up of 2 s (the JIT compiles the recursion), prints "ready".
public final class Recursion {
    static long sink;

    static long bottom(long x) {
        for (int i = 0; i < 200_000; i++) {
            x = (x ^ i) * 0x9e3779b97f4a7c15L;
            x += x >>> 29;
        }
        return x;
    }

    static long recurse(int depth, long x) {
        if (depth == 0) {
            return bottom(x);
        }
        // Not a tail call: every level stays on the stack while bottom runs.
        return recurse(depth - 1, x) + depth;
    }

    public static void main(String[] args) {
        long seconds = Long.parseLong(args[0]);
        int depth = Integer.parseInt(args[1]);
        Control.watch(args);
        long warm = System.nanoTime() + 2_000_000_000L;
        while (System.nanoTime() < warm) {
            sink += recurse(depth, sink);
        }
        System.out.println("ready");
        System.out.flush();
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (!Control.over(end)) {
            sink += recurse(depth, sink);
        }
    }
}
