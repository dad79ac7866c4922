//! Ways of writing code that the verifier checks in few passes.
//!
//! The verifier prunes a path when its state matches one already proven safe at the same instruction.
//! A scalar that decides a bound (a helper's size, an index into a map value) is "precise": states
//! only match if it has the same range, and so, back through the arithmetic, must every value it was
//! computed from. A walk step reads a dozen such values, each with its own ranges on each path through
//! the branches before it, and without a cut the paths multiply (470k instructions verified for a
//! 1,700-instruction program, 4 s of a CPU at every start on Linux 6.18).

/// `value`, through `slot` (map memory): the verifier knows nothing of a scalar loaded from a map
/// value, so precision tracking stops at this load, and the caller bounds the value again where a
/// bound is needed. Costs a store and a load of one cache line the caller already holds.
#[inline(always)]
pub fn forget(slot: &mut u64, value: u64) -> u64 {
    // SAFETY: `slot` is a valid, exclusive reference.
    unsafe {
        core::ptr::write_volatile(slot, value);
        core::ptr::read_volatile(slot)
    }
}

/// A global function's result as a `bpf_loop` callback's answer: 0 or 1, which the verifier must see.
/// The compiler knows the function returns only those and would hand its result back as is, which to
/// the verifier is any scalar (a global function's result is unknown to it): through `slot`, the test
/// stays.
#[inline(always)]
pub fn loop_answer(slot: &mut u64, result: i64) -> i64 {
    i64::from(forget(slot, result as u64) != 0)
}
