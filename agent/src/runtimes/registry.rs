//! The runtimes sonde knows, in one list ([`RUNTIMES`]): the only place that names them all. A new
//! runtime is a folder under `runtimes/` (its capture, its namer, its ELF reader, its figures, all
//! declared in its `register.rs`), its kernel walker, and one line here. Everything else reaches the
//! runtimes through the functions below, which know none of them by name.

use std::{path::Path, sync::LazyLock};

use super::{
    Runtime, Runtimes, go, hotspot, php, python, ruby,
    seam::{
        CodeRows, ExeIdentity, FuzzTarget, KernelSide, Registration, RuntimeCache, RuntimeCapture,
        RuntimeMaps, RuntimeNames,
    },
    trace_context, v8,
};
use crate::process::ElfReader;

/// Every runtime, in `--runtimes` order.
pub(crate) const RUNTIMES: [&Registration; 7] = [
    &python::register::REGISTRATION,
    &go::register::REGISTRATION,
    &hotspot::register::REGISTRATION,
    &v8::register::REGISTRATION,
    &ruby::register::REGISTRATION,
    &php::register::REGISTRATION,
    &trace_context::register::REGISTRATION,
];

/// Each runtime's kernel side, in `--runtimes` order.
pub(crate) fn kernel_sides() -> impl Iterator<Item = &'static KernelSide> {
    RUNTIMES.iter().map(|r| &r.kernel)
}

/// What each runtime reads of a binary as it is first opened.
pub(crate) static ELF_READERS: LazyLock<Vec<ElfReader>> =
    LazyLock::new(|| RUNTIMES.iter().map(|r| r.elf).collect());

/// The first runtime's identity of the executable at `exe`, if any says what it is.
pub(crate) fn identify(exe: &Path) -> Option<ExeIdentity> {
    RUNTIMES
        .iter()
        .filter_map(|r| r.identify)
        .find_map(|identify| identify(exe))
}

/// The resource attributes process `pid` published of itself (a tracer's process context), first
/// runtime first.
pub(crate) fn published_resource(pid: u32) -> Vec<(String, String)> {
    RUNTIMES
        .iter()
        .filter_map(|r| r.resource)
        .flat_map(|resource| resource(pid))
        .collect()
}

/// The own unwind rows for `binary`'s code of the first runtime that is `on` and has them.
pub(crate) fn unwind_rows(binary: &crate::process::Binary, on: Runtimes) -> Option<Vec<CodeRows>> {
    RUNTIMES
        .iter()
        .filter(|r| on.has(r.runtime))
        .find_map(|r| (r.unwind?)(binary))
}

/// Where mapping `m` of `process` unwinds as, if a runtime `process` runs says
/// (`seam::UnwindAs`).
pub(crate) fn unwind_as(
    process: &crate::process::ProcessInfo,
    m: &crate::process::Mapping,
) -> Option<super::seam::JitFrame> {
    RUNTIMES
        .iter()
        .filter(|r| process.runtime(r.runtime.name()).is_some())
        .find_map(|r| (r.unwind_as?)(process, m))
}

/// The runtimes' fuzz targets, by name.
pub(crate) fn fuzz_targets() -> impl Iterator<Item = &'static FuzzTarget> {
    RUNTIMES.iter().flat_map(|r| r.fuzz.iter())
}

/// The caches of what the runtimes read of processes: the symbolizer's namers name from them, the
/// captures fill them while objects live. One per runtime, made by the runtime.
#[derive(Clone)]
pub(crate) struct RuntimeCaches(Vec<(Runtime, RuntimeCache)>);

impl Default for RuntimeCaches {
    fn default() -> Self {
        Self(RUNTIMES.iter().map(|r| (r.runtime, (r.cache)())).collect())
    }
}

impl RuntimeCaches {
    fn of(&self, runtime: Runtime) -> &RuntimeCache {
        &self
            .0
            .iter()
            .find(|(r, _)| *r == runtime)
            .expect("every registered runtime has a cache")
            .1
    }
}

/// The namers of the runtimes that are `on`, in `--runtimes` order, naming from `caches`.
pub(crate) fn namers(on: Runtimes, caches: &RuntimeCaches) -> Vec<Box<dyn RuntimeNames>> {
    RUNTIMES
        .iter()
        .filter(|r| on.has(r.runtime))
        .map(|r| (r.namer)(caches.of(r.runtime)))
        .collect()
}

/// The captures of the runtimes whose kernel side the loader set up: a runtime whose map is absent
/// (off, or not walkable with `--unwind fp`) is not looked for.
pub(crate) fn captures(
    mut maps: RuntimeMaps,
    caches: &RuntimeCaches,
) -> Vec<Box<dyn RuntimeCapture>> {
    RUNTIMES
        .iter()
        .filter_map(|r| (r.capture)(&mut maps, caches.of(r.runtime)))
        .collect()
}

/// Captures of `on` with nothing handed to the kernel: the runtimes' tests capture processes
/// without loading the programs (a runtime that needs its map is never among them).
#[cfg(test)]
pub(crate) fn captures_without_kernel(
    on: Runtimes,
    caches: &RuntimeCaches,
) -> Vec<Box<dyn RuntimeCapture>> {
    RUNTIMES
        .iter()
        .filter(|r| on.has(r.runtime))
        .filter_map(|r| Some((r.capture_without_kernel?)(caches.of(r.runtime))))
        .collect()
}
