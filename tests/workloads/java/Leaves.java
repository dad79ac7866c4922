// A tiny compiled leaf called in a loop, its call kept (the test passes
// -XX:CompileCommand=dontinline,Leaves::leaf): C2 gives a method that calls nothing a frame built
// without a stack bang (`sub rsp, N; mov [rsp + d], rbp`) and ends every method with a return poll
// (`add rsp, N; pop rbp; cmp rsp, [r15 + ..]; ja ..; ret`), so most of the leaf's samples land in its
// prologue or epilogue, where its frame is half built or half gone.
//
// Expected stack (leaf first): `Leaves.leaf` -> `Leaves.spin` -> `Leaves.main`.
//
// Usage: java -cp DIR Leaves SECONDS [eof] (see Control)
// After a warm-up of 2 s (the JIT compiles both methods), prints "ready".
public final class Leaves {
    static long sink;

    static long leaf(long x) {
        return x * 31 + 7;
    }

    static long spin(long x) {
        for (int i = 0; i < 1_000_000; i++) {
            x = leaf(x ^ i);
        }
        return x;
    }

    public static void main(String[] args) {
        long seconds = Long.parseLong(args[0]);
        Control.watch(args);
        long warm = System.nanoTime() + 2_000_000_000L;
        while (System.nanoTime() < warm) {
            sink += spin(sink);
        }
        System.out.println("ready");
        System.out.flush();
        long end = System.nanoTime() + seconds * 1_000_000_000L;
        while (!Control.over(end)) {
            sink += spin(sink);
        }
    }
}
