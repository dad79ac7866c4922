//! Tests of the table builder against GNU binutils: the tables of libc, of a C test binary built here
//! (`testdata/frames.c`) and of the vDSO are compared row by row with `readelf
//! --debug-dump=frames-interp`. They need gcc and binutils (readelf, nm, objcopy) and fail, never
//! skip, without them.

mod aarch64;
mod compare;
mod errors;
pub(crate) mod fixture;
mod go_rows;
mod landmarks;
mod readelf;

// The builder's API, for the test modules.
use super::{BuiltTable, FrameSource, TableError, build, build_file};
