import java.util.function.LongUnaryOperator;

// The caller and callee of a `Patched` round (see there): loaded afresh each round.
public final class PatchedCaller implements LongUnaryOperator {
    private final PatchedShape shape = new PatchedSquare();

    @Override
    public long applyAsLong(long spin) {
        return caller(shape, spin);
    }

    /// Compiled with `shape.step` inlined while `PatchedSquare` is the only shape.
    static long caller(PatchedShape shape, long spin) {
        long x = shape.step(spin);
        x = callee(x, spin);
        return shape.step(x);
    }

    /// Returns at once, or loads a second shape and burns `spin` nanoseconds.
    static long callee(long x, long spin) {
        if (spin == 0) {
            return x + 1;
        }
        Patched.loadCircle(PatchedCaller.class.getClassLoader());
        long end = System.nanoTime() + spin;
        while (System.nanoTime() < end) {
            for (int i = 0; i < 1000; i++) {
                x = x * 31 + i;
            }
        }
        return x;
    }
}
