// The only shape of a `Patched` round until `PatchedCircle` is loaded (see there).
public final class PatchedSquare extends PatchedShape {
    @Override
    long step(long x) {
        return x * 31 + 7;
    }
}
