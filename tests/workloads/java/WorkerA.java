// One worker of `Churn` (see there): loaded afresh each round, run for about 20 ms, its loop
// compiled and then deoptimized when `rare` is first called, 5 ms before the end.
public final class WorkerA implements Runnable {
    static long alpha(long x, int i) {
        return (x ^ i) * 31 + (x >>> 11);
    }

    static long rare(long x, int i) {
        return x - i * 31L;
    }

    public static long sink;

    @Override
    public void run() {
        long start = System.nanoTime();
        long flip = start + 15_000_000L;
        long end = start + 20_000_000L;
        long x = 1;
        int i = 0;
        long now;
        while ((now = System.nanoTime()) < end) {
            for (int k = 0; k < 200; k++, i++) {
                if (now > flip) {
                    x = rare(x, i);
                } else {
                    x = alpha(x, i);
                }
            }
        }
        sink += x;
    }
}
