//! The runtimes sonde knows, registered in one list ([`captures`]): the only place that names
//! them all. A new runtime is a folder under `runtimes/` implementing [`RuntimeCapture`], its kernel
//! walker, and one line here.

use std::sync::{Arc, Mutex};

use aya::maps::{HashMap, MapData};
use sonde_abi::{go::GoProc, hotspot::HsProc, names, python::PyProc, v8::V8Proc};

use super::{
    go::capture::GoCapture, hotspot::JavaNames, hotspot::capture::JavaCapture, publish::Publisher,
    python::PythonNames, python::capture::PythonCapture, seam::RuntimeCapture, v8::V8Names,
    v8::capture::NodeCapture,
};

/// The kernel maps the loader took for the runtimes whose kernel side is on (None: off).
#[derive(Default)]
pub(crate) struct RuntimeMaps {
    /// `PY_PROCS`, when Python frames are walked.
    pub(crate) python: Option<HashMap<MapData, u32, PyProc>>,
    /// `GO_PROCS`, when goroutine labels are read.
    pub(crate) go: Option<HashMap<MapData, u32, GoProc>>,
    /// `HS_PROCS`, when Java frames are walked.
    pub(crate) java: Option<HashMap<MapData, u32, HsProc>>,
    /// `V8_PROCS`, when JavaScript frames are walked.
    pub(crate) node: Option<HashMap<MapData, u32, V8Proc>>,
}

/// The symbolizer's caches of what the kernel announces, which captures fill while objects live.
#[derive(Clone, Default)]
pub(crate) struct NameCaches {
    pub(crate) python: Arc<Mutex<PythonNames>>,
    pub(crate) java: Arc<Mutex<JavaNames>>,
    pub(crate) v8: Arc<Mutex<V8Names>>,
}

/// The captures of the runtimes whose kernel side the loader set up: a runtime whose map is absent
/// (off, or not walkable with `--unwind fp`) is not looked for.
pub(crate) fn captures(maps: RuntimeMaps, caches: &NameCaches) -> Vec<Box<dyn RuntimeCapture>> {
    let mut all: Vec<Box<dyn RuntimeCapture>> = Vec::new();
    if let Some(map) = maps.python {
        let publisher = Publisher::new(map, names::PY_PROCS, "Python");
        all.push(Box::new(PythonCapture::new(
            Some(publisher),
            caches.python.clone(),
        )));
    }
    if let Some(map) = maps.go {
        let publisher = Publisher::new(map, names::GO_PROCS, "Go");
        all.push(Box::new(GoCapture::new(publisher)));
    }
    if let Some(map) = maps.java {
        let publisher = Publisher::new(map, names::HS_PROCS, "Java");
        all.push(Box::new(JavaCapture::new(
            Some(publisher),
            caches.java.clone(),
        )));
    }
    if let Some(map) = maps.node {
        let publisher = Publisher::new(map, names::V8_PROCS, "Node.js");
        all.push(Box::new(NodeCapture::new(
            Some(publisher),
            caches.v8.clone(),
        )));
    }
    all
}

/// Captures of `on` with nothing handed to the kernel: the runtimes' tests capture processes
/// without loading the programs. Go needs its map, so it is never among them.
#[cfg(test)]
pub(crate) fn captures_without_kernel(
    on: super::Runtimes,
    caches: &NameCaches,
) -> Vec<Box<dyn RuntimeCapture>> {
    use super::Runtime;
    let mut all: Vec<Box<dyn RuntimeCapture>> = Vec::new();
    if on.has(Runtime::Python) {
        all.push(Box::new(PythonCapture::new(None, caches.python.clone())));
    }
    if on.has(Runtime::Java) {
        all.push(Box::new(JavaCapture::new(None, caches.java.clone())));
    }
    if on.has(Runtime::Node) {
        all.push(Box::new(NodeCapture::new(None, caches.v8.clone())));
    }
    all
}
