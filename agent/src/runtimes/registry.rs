//! The runtimes sonde knows, registered in one list ([`captures`]): the only place that names
//! them all. A new runtime is a folder under `runtimes/` implementing [`RuntimeCapture`], its kernel
//! walker, and one line here.

use std::sync::{Arc, Mutex};

use aya::maps::{HashMap, Map, MapData};
use sonde_abi::names::{self, globals};

use super::{
    Runtime, Runtimes,
    figures::Declared,
    go::{capture::GoCapture, naming::GoNaming},
    hotspot::{JavaNames, capture::JavaCapture, naming::JavaNaming},
    publish::Publisher,
    python::{PythonNames, capture::PythonCapture, naming::PythonNaming},
    seam::{KernelSide, RuntimeCapture, RuntimeNames},
    v8::{V8Names, capture::NodeCapture, naming::NodeNaming},
};

/// Each runtime's kernel side, in `--runtimes` order.
pub(crate) const KERNEL_SIDES: [KernelSide; 4] = [
    // CPython: walks its frames after the native ones (`unwind/python.rs`).
    KernelSide {
        runtime: Runtime::Python,
        procs_map: names::PY_PROCS,
        other_maps: &[names::PY_THREADS],
        global: globals::PYTHON,
        needs_tables: false,
        needs_thread_pointer: true,
    },
    // Go: copies the sampled goroutine's labels (`go_labels.rs`); its frames are native.
    KernelSide {
        runtime: Runtime::Go,
        procs_map: names::GO_PROCS,
        other_maps: &[names::GO_LABELS],
        global: globals::GO,
        needs_tables: false,
        needs_thread_pointer: true,
    },
    // HotSpot: steps Java frames in place (`unwind/hotspot.rs`).
    KernelSide {
        runtime: Runtime::Java,
        procs_map: names::HS_PROCS,
        other_maps: &[],
        global: globals::JAVA,
        needs_tables: true,
        needs_thread_pointer: false,
    },
    // V8: steps JavaScript frames in place (`unwind/v8.rs`).
    KernelSide {
        runtime: Runtime::Node,
        procs_map: names::V8_PROCS,
        other_maps: &[],
        global: globals::V8,
        needs_tables: true,
        needs_thread_pointer: false,
    },
];

/// Each runtime's figures and the shared families they are series of, in `--runtimes` order.
pub(crate) const DECLARED: [Declared; 4] = [
    Declared {
        runtime: Runtime::Python,
        figures: super::python::figures::FIGURES,
        families: super::python::figures::FAMILIES,
    },
    Declared {
        runtime: Runtime::Go,
        figures: super::go::figures::FIGURES,
        families: super::go::figures::FAMILIES,
    },
    Declared {
        runtime: Runtime::Java,
        figures: super::hotspot::figures::FIGURES,
        families: super::hotspot::figures::FAMILIES,
    },
    Declared {
        runtime: Runtime::Node,
        figures: super::v8::figures::FIGURES,
        families: super::v8::figures::FAMILIES,
    },
];

/// The per-process settings maps the loader took for the runtimes whose kernel side is on, by
/// runtime; each runtime's capture types its own.
#[derive(Default)]
pub(crate) struct RuntimeMaps(pub(crate) Vec<(Runtime, Map)>);

impl RuntimeMaps {
    /// The map of `runtime` as the hash it is, if its kernel side is on.
    fn take<V: aya::Pod>(&mut self, runtime: Runtime) -> Option<HashMap<MapData, u32, V>> {
        let at = self.0.iter().position(|(r, _)| *r == runtime)?;
        let (_, map) = self.0.swap_remove(at);
        match HashMap::try_from(map) {
            Ok(map) => Some(map),
            Err(err) => {
                tracing::warn!(
                    runtime = runtime.name(),
                    "its settings map is not the hash it should be ({err}): the runtime is off"
                );
                None
            }
        }
    }
}

/// The symbolizer's caches of what the kernel announces, which captures fill while objects live.
#[derive(Clone, Default)]
pub(crate) struct NameCaches {
    pub(crate) python: Arc<Mutex<PythonNames>>,
    pub(crate) java: Arc<Mutex<JavaNames>>,
    pub(crate) v8: Arc<Mutex<V8Names>>,
}

/// The namers of the runtimes that are `on`, in `--runtimes` order, naming from `caches` (which
/// their captures fill).
pub(crate) fn namers(on: Runtimes, caches: &NameCaches) -> Vec<Box<dyn RuntimeNames>> {
    Runtime::ALL
        .into_iter()
        .filter(|r| on.has(*r))
        .map(|r| -> Box<dyn RuntimeNames> {
            match r {
                Runtime::Python => Box::new(PythonNaming::new(caches.python.clone())),
                Runtime::Go => Box::new(GoNaming::default()),
                Runtime::Java => Box::new(JavaNaming::new(caches.java.clone())),
                Runtime::Node => Box::new(NodeNaming::new(caches.v8.clone())),
            }
        })
        .collect()
}

/// The captures of the runtimes whose kernel side the loader set up: a runtime whose map is absent
/// (off, or not walkable with `--unwind fp`) is not looked for.
pub(crate) fn captures(mut maps: RuntimeMaps, caches: &NameCaches) -> Vec<Box<dyn RuntimeCapture>> {
    let mut all: Vec<Box<dyn RuntimeCapture>> = Vec::new();
    if let Some(map) = maps.take(Runtime::Python) {
        let publisher = Publisher::new(map, names::PY_PROCS, "Python");
        all.push(Box::new(PythonCapture::new(
            Some(publisher),
            caches.python.clone(),
        )));
    }
    if let Some(map) = maps.take(Runtime::Go) {
        let publisher = Publisher::new(map, names::GO_PROCS, "Go");
        all.push(Box::new(GoCapture::new(publisher)));
    }
    if let Some(map) = maps.take(Runtime::Java) {
        let publisher = Publisher::new(map, names::HS_PROCS, "Java");
        all.push(Box::new(JavaCapture::new(
            Some(publisher),
            caches.java.clone(),
        )));
    }
    if let Some(map) = maps.take(Runtime::Node) {
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
