// A 50/30/20 CPU split in Java, measured by the workload itself.
//
// Expected stacks: `Split.main` -> `Split.round` -> `Split.burnA` (50% of the time), `burnB` (30%),
// `burnC` (20%), each with `Split.step` above it: a small loop the JIT inlines into every burner
// (with `-Xint`, an interpreted frame of its own). Its loop keeps a safepoint poll (loop strip
// mining), whose debug information names `step` inside the burner's compiled code. Each burner runs until its deadline in rounds of
// 100 ms, so a 99 Hz sampler does not alias with the rounds.
//
// Usage: java -cp DIR Split SECONDS [WARMUP_SECONDS] [eof] (see Control)
// After the warm-up (not accounted), prints "ready" and, at the end, the time spent in each burner
// as measured with System.nanoTime around its calls: "accounted burnA=50.1 burnB=29.9 burnC=20.0".
public final class Split {
    static long sink;

    static long step(long x) {
        for (int i = 0; i < 2000; i++) {
            x = (x ^ i) * 0x9e3779b97f4a7c15L;
            x += x >>> 29;
        }
        return x;
    }

    static long burnA(long deadline) {
        long x = 1;
        while (System.nanoTime() < deadline) {
            x = step(x);
        }
        return x;
    }

    static long burnB(long deadline) {
        long x = 2;
        while (System.nanoTime() < deadline) {
            x = step(x);
        }
        return x;
    }

    static long burnC(long deadline) {
        long x = 3;
        while (System.nanoTime() < deadline) {
            x = step(x);
        }
        return x;
    }

    /// One 100 ms round; adds each burner's nanoseconds to `spent`.
    static void round(long[] spent) {
        long t0 = System.nanoTime();
        sink += burnA(t0 + 50_000_000L);
        long t1 = System.nanoTime();
        sink += burnB(t1 + 30_000_000L);
        long t2 = System.nanoTime();
        sink += burnC(t2 + 20_000_000L);
        long t3 = System.nanoTime();
        spent[0] += t1 - t0;
        spent[1] += t2 - t1;
        spent[2] += t3 - t2;
    }

    public static void main(String[] args) {
        double seconds = Double.parseDouble(args[0]);
        double warmup = args.length > 1 && !args[1].equals("eof") ? Double.parseDouble(args[1]) : 0;
        Control.watch(args);
        long[] ignored = new long[3];
        long warmEnd = System.nanoTime() + (long) (warmup * 1e9);
        while (System.nanoTime() < warmEnd) {
            round(ignored);
        }
        System.out.println("ready");
        System.out.flush();
        long[] spent = new long[3];
        long end = System.nanoTime() + (long) (seconds * 1e9);
        while (!Control.over(end)) {
            round(spent);
        }
        double total = spent[0] + spent[1] + spent[2];
        System.out.printf(
                "accounted burnA=%.1f burnB=%.1f burnC=%.1f%n",
                100 * spent[0] / total, 100 * spent[1] / total, 100 * spent[2] / total);
        System.out.println(sink == 42 ? "" : "done");
    }
}
