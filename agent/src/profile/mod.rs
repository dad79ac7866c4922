//! The in-memory profile model and its encoders (pprof, OTLP, folded stacks, flame graph).

pub mod folded;
pub mod group;
pub(crate) mod gzip;
pub mod model;
pub mod otlp_proto;
pub mod pprof;

pub use model::{Frame, FrameKind, Labels, Module, Profile, ProfileKind, StackSample, Symbol};
