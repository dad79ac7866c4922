// How the Java workloads end: after their SECONDS, or earlier when started with `eof` as their
// last argument and their standard input closes (the tests close it once the recording is over,
// so the JVM is still alive when sonde names its frames, and no test waits out a fixed run).
public final class Control {
    private static volatile boolean stopped;

    /// Starts watching standard input when `args` ends with "eof".
    static void watch(String[] args) {
        if (args.length == 0 || !args[args.length - 1].equals("eof")) {
            return;
        }
        Thread watcher = new Thread(() -> {
            try {
                while (System.in.read() >= 0) {
                    // Anything written is ignored; only the end counts.
                }
            } catch (java.io.IOException e) {
                // A broken input ends the run as a closed one does.
            }
            stopped = true;
        }, "eof-watcher");
        watcher.setDaemon(true);
        watcher.start();
    }

    /// Whether the run should end now: past `end` (System.nanoTime), or standard input closed.
    static boolean over(long end) {
        return stopped || System.nanoTime() >= end;
    }
}
