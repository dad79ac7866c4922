// A shape of `Patched` (see there): loaded afresh each round.
public abstract class PatchedShape {
    abstract long step(long x);
}
