//! The in-memory profile model and its encoders (pprof, folded stacks, flame graph).

pub mod folded;
pub mod group;
pub mod model;
pub mod pprof;

pub use model::{Frame, FrameKind, Module, Profile, ProfileKind, StackSample, Symbol};
