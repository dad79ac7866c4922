// Off-CPU time in Java: the main thread alternates `Sleeps.sleepTwenty` (Thread.sleep 20 ms) and
// `Sleeps.sleepTen` (10 ms), so two thirds of its blocked time is under sleepTwenty.
//
// Usage: java -cp DIR Sleeps SECONDS [WARMUP_SECONDS] [eof] (see Control); prints "ready" after the warm-up.
public final class Sleeps {
    static void sleepTwenty() throws InterruptedException {
        Thread.sleep(20);
    }

    static void sleepTen() throws InterruptedException {
        Thread.sleep(10);
    }

    public static void main(String[] args) throws InterruptedException {
        double seconds = Double.parseDouble(args[0]);
        double warmup = args.length > 1 && !args[1].equals("eof") ? Double.parseDouble(args[1]) : 0;
        Control.watch(args);
        long warmEnd = System.nanoTime() + (long) (warmup * 1e9);
        long end = warmEnd + (long) (seconds * 1e9);
        boolean ready = false;
        while (!Control.over(end)) {
            if (!ready && System.nanoTime() >= warmEnd) {
                System.out.println("ready");
                System.out.flush();
                ready = true;
            }
            sleepTwenty();
            sleepTen();
        }
    }
}
