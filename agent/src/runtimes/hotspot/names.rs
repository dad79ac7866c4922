//! Names the Java frames the kernel stored in user stacks (`sonde_abi::hotspot`): each method and code
//! blob is read once from its process (`method`, `scopes`) and cached with the frames built from it,
//! so a stack seen again costs hash lookups.
//!
//! Every frame is validated before it is named, since the JVM frees and reuses methods and compiled
//! code while it runs: an interpreted frame's `ConstMethod*` and a compiled frame's compile id must
//! be what the kernel saw; a cached object that no longer matches is read again, and a frame that
//! still does not match is stale: counted and left unnamed, never named after what lives there now.
//!
//! The cache over processes, its budget and its frames are `runtimes::frame_names`'s, shared with
//! V8's names; this file is what HotSpot reads of one process ([`Process`]) and how it names a frame.

use std::{
    collections::{HashMap, HashSet},
    hash::{DefaultHasher, Hash as _, Hasher as _},
    sync::Arc,
};

use sonde_abi::hotspot::{JavaFrame, kind};

use super::{
    detect::Jvm,
    method::{MethodInfo, MethodReader, ReadError},
    scopes::{Blob, BlobReader, Scope},
};
use crate::{
    profile::{Frame, FrameKind, Module, Symbol},
    runtimes::frame_names::{FrameNames, ProcessCache},
};

/// Pseudo path of the mapping every Java frame is in.
pub(crate) const JAVA_PATH: &str = "[java]";
/// What a JVM stub's name starts with in profiles (`[jvm stub] StubRoutines (1)`).
pub(crate) const STUB_PREFIX: &str = "[jvm stub] ";

pub(crate) use crate::runtimes::Outcome;

/// The methods one piece of compiled code runs, by `Method*`.
type CodeMethods = HashMap<u64, Arc<MethodInfo>>;

/// The Java frame cache.
pub(crate) type JavaNames = FrameNames<Process>;

/// One process's methods, blobs and compiled code.
pub(crate) struct Process {
    /// The JVM the entries were read with; another one (an exec) invalidates them.
    jvm: Arc<Jvm>,
    /// By `Method*`; Err when it could not be read.
    methods: HashMap<u64, Result<Arc<MethodInfo>, Outcome>>,
    /// Stubs, by `CodeBlob*`; Err when they could not be read.
    blobs: HashMap<u64, Result<Arc<Blob>, Outcome>>,
    /// Compiled code, by (`CodeBlob*`, compile id): the JVM frees compiled code and puts new code at
    /// the same address, so an address alone does not say which code a frame ran.
    code: HashMap<(u64, u32), Result<Arc<Blob>, Outcome>>,
    /// The methods of compiled code, by (blob, compile id), read with the blob while the code was
    /// live: they name its frames even after its classes are unloaded.
    compiled: HashMap<(u64, u32), Arc<CodeMethods>>,
    /// [`MethodInfo::size`] and [`Blob::size`] of what is held.
    bytes: usize,
}

impl ProcessCache for Process {
    type Runtime = Jvm;
    const PATH: &'static str = JAVA_PATH;
    const WHAT: &'static str = "Java";
    const MAX_ENTRIES: usize = 100_000;
    /// Names, line tables and debug information.
    const MAX_BYTES: usize = 128 << 20;

    fn new(jvm: &Arc<Jvm>) -> Self {
        Self {
            jvm: jvm.clone(),
            methods: HashMap::new(),
            blobs: HashMap::new(),
            code: HashMap::new(),
            compiled: HashMap::new(),
            bytes: 0,
        }
    }

    fn runtime(&self) -> &Arc<Jvm> {
        &self.jvm
    }

    fn entries(&self) -> usize {
        self.methods.len() + self.blobs.len() + self.code.len() + self.compiled.len()
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    /// Reads the method, compiled code or stub of `frame` while its class is loaded, its code not
    /// freed and the JVM alive.
    fn preload(&mut self, pid: u32, frame: JavaFrame) {
        let _ = match frame.kind {
            kind::INTERPRETED => {
                method(pid, self, frame.address, Expect::Kernel(frame.check)).map(|_| ())
            }
            kind::COMPILED | kind::NATIVE_WRAPPER => {
                blob(pid, self, frame.address, frame.check).map(|_| ())
            }
            kind::STUB | kind::INTERPRETER_UNKNOWN => stub_name(pid, self, frame).map(|_| ()),
            _ => Ok(()),
        };
    }

    fn name(&mut self, pid: u32, frame: JavaFrame, module: &Arc<Module>) -> Result<Frame, Outcome> {
        name(pid, self, frame, module)
    }

    fn forget_failures(&mut self) {
        self.methods.retain(|_, m| m.is_ok());
        self.blobs.retain(|_, b| b.is_ok());
        self.code.retain(|_, b| b.is_ok());
        let code = &self.code;
        self.compiled.retain(|key, _| code.contains_key(key));
    }
}

/// Names `frame` of `pid` from `process`'s cache, reading what is missing.
fn name(
    pid: u32,
    process: &mut Process,
    frame: JavaFrame,
    module: &Arc<Module>,
) -> Result<Frame, Outcome> {
    let chain: Vec<Symbol> = match frame.kind {
        kind::INTERPRETED => {
            let method: Arc<MethodInfo> =
                method(pid, process, frame.address, Expect::Kernel(frame.check))?;
            vec![symbol(&method, frame.position as i32)]
        }
        kind::COMPILED => {
            let scopes = match &*blob(pid, process, frame.address, frame.check)? {
                Blob::Nmethod(n) => n
                    .scopes_at(frame.position, frame.exact)
                    .map_err(|e| failed(pid, &e))?,
                // Not compiled Java code (any more): a freed and reused blob.
                _ => return Err(Outcome::Stale),
            };
            let mut chain = Vec::with_capacity(scopes.len());
            for Scope { method: m, bci } in scopes {
                let method = compiled_method(pid, process, (frame.address, frame.check), m)?;
                chain.push(symbol(&method, bci));
            }
            chain
        }
        kind::NATIVE_WRAPPER => match &*blob(pid, process, frame.address, frame.check)? {
            Blob::NativeWrapper { method: m, .. } => {
                let method = compiled_method(pid, process, (frame.address, frame.check), *m)?;
                vec![symbol(&method, -1)]
            }
            _ => return Err(Outcome::Stale),
        },
        kind::STUB | kind::INTERPRETER_UNKNOWN => {
            let name = stub_name(pid, process, frame)?;
            vec![Symbol {
                name: format!("{STUB_PREFIX}{name}"),
                file: None,
                line: None,
            }]
        }
        // No kind the kernel writes: a corrupt word.
        _ => return Err(Outcome::Unreadable),
    };
    Ok(named_frame(module, chain))
}

/// Method `m` of the compiled code at (blob, compile id): as read with the blob, or, when the blob was
/// read without it, as it is now (the code was just validated: the methods it names are live).
fn compiled_method(
    pid: u32,
    process: &mut Process,
    code: (u64, u32),
    m: u64,
) -> Result<Arc<MethodInfo>, Outcome> {
    if let Some(method) = process
        .compiled
        .get(&code)
        .and_then(|methods| methods.get(&m))
    {
        return Ok(method.clone());
    }
    method(pid, process, m, Expect::Live)
}

/// What a method is checked against before it names a frame.
#[derive(Clone, Copy)]
enum Expect {
    /// The kernel's validation value (an interpreted frame): `ConstMethod*` >> 3 as it read it.
    Kernel(u32),
    /// The method as it is now (a method of validated compiled code, live now): a cached entry is
    /// used only if its `ConstMethod*` still is the method's.
    Live,
}

/// The method at `addr`, read unless cached, validated as `expect` says: read again when the cached
/// one does not match, stale when the fresh one does not either.
fn method(
    pid: u32,
    process: &mut Process,
    addr: u64,
    expect: Expect,
) -> Result<Arc<MethodInfo>, Outcome> {
    let reader = MethodReader::new(pid, &process.jvm.layout);
    // A few words tell whether the method is the one expected.
    let expected = match expect {
        Expect::Kernel(check) => check,
        Expect::Live => reader.check(addr).map_err(|e| failed(pid, &e))?,
    };
    let cached = process.methods.get(&addr).cloned();
    match cached {
        Some(Ok(m)) if m.check() == expected => return Ok(m),
        Some(Err(outcome)) => return Err(outcome),
        _ => {}
    }
    if let Expect::Kernel(check) = expect
        && reader.check(addr).map_err(|e| failed(pid, &e))? != check
    {
        return Err(Outcome::Stale);
    }
    let read = reader.read(addr).map(Arc::new).map_err(|e| failed(pid, &e));
    if let Ok(m) = &read {
        // A replaced entry's bytes stay counted until the next start over: an overestimate.
        process.bytes += m.size();
    }
    process.methods.insert(addr, read.clone());
    match read? {
        m if m.check() == expected => Ok(m),
        // Changed between the two reads: freed and reused right now.
        _ => Err(Outcome::Stale),
    }
}

/// The compiled code the kernel saw at `addr` with compile id `check`: cached, else read now if that
/// code still lives there (stale if other code does).
fn blob(pid: u32, process: &mut Process, addr: u64, check: u32) -> Result<Arc<Blob>, Outcome> {
    if let Some(cached) = process.code.get(&(addr, check)) {
        return cached.clone();
    }
    let read = BlobReader::new(pid, &process.jvm.layout)
        .read(addr)
        .map(Arc::new)
        .map_err(|e| failed(pid, &e));
    let b = match read {
        Ok(b) => b,
        Err(outcome) => {
            process.code.insert((addr, check), Err(outcome));
            return Err(outcome);
        }
    };
    let id = match &*b {
        Blob::Nmethod(n) => Some(n.compile_id),
        Blob::NativeWrapper { compile_id, .. } => Some(*compile_id),
        Blob::Other { .. } => None,
    };
    if let Some(id) = id {
        // What lives there now is kept for its own frames, whichever code this frame ran.
        process.bytes += b.size();
        process.code.insert((addr, id), Ok(b.clone()));
        remember_methods(pid, process, (addr, id), &b);
    }
    if id != Some(check) {
        process.code.insert((addr, check), Err(Outcome::Stale));
        return Err(Outcome::Stale);
    }
    Ok(b)
}

/// Reads every method `b` (compiled code at (blob, compile id), just read and live) runs, so its
/// frames keep their names after its classes are unloaded.
fn remember_methods(pid: u32, process: &mut Process, code: (u64, u32), b: &Blob) {
    let wanted = match b {
        Blob::Nmethod(n) => n.methods(),
        Blob::NativeWrapper { method, .. } => HashSet::from([*method]),
        Blob::Other { .. } => return,
    };
    let methods: HashMap<u64, Arc<MethodInfo>> = wanted
        .into_iter()
        .filter_map(|m| Some((m, method(pid, process, m, Expect::Live).ok()?)))
        .collect();
    process.compiled.insert(code, Arc::new(methods));
}

/// The name of the stub blob of `frame`, read unless cached (stubs live as long as the JVM),
/// validated (for a stub) against the first four bytes of its name the kernel read.
fn stub_name(pid: u32, process: &mut Process, frame: JavaFrame) -> Result<String, Outcome> {
    let name_of = |b: &Blob| match b {
        Blob::Other { name } => Some(name.clone()),
        Blob::Nmethod(_) | Blob::NativeWrapper { .. } => None,
    };
    let matches = |name: &str| {
        let mut head = [0u8; 4];
        let n = name.len().min(4);
        head[..n].copy_from_slice(&name.as_bytes()[..n]);
        frame.kind != kind::STUB || u32::from_le_bytes(head) == frame.check
    };
    match process.blobs.get(&frame.address) {
        Some(Ok(b)) if name_of(b).is_some_and(|n| matches(&n)) => {
            return Ok(name_of(b).expect("a stub"));
        }
        Some(Err(outcome)) => return Err(*outcome),
        _ => {}
    }
    let read = BlobReader::new(pid, &process.jvm.layout)
        .read(frame.address)
        .map(Arc::new)
        .map_err(|e| failed(pid, &e));
    if let Ok(b) = &read {
        process.bytes += b.size();
    }
    process.blobs.insert(frame.address, read.clone());
    let blob = read?;
    match name_of(&blob) {
        Some(name) if matches(&name) => Ok(name),
        // Another stub, or compiled code, lives there now.
        _ => Err(Outcome::Stale),
    }
}

/// The outcome of a failed read (staleness is told by the validation values, not by the readers).
fn failed(pid: u32, e: &ReadError) -> Outcome {
    // Counted per frame; stale and garbage addresses are common enough not to warn.
    tracing::debug!(pid, "Java frame left unnamed: {e}");
    Outcome::Unreadable
}

/// The symbol of `method` at `bci`.
fn symbol(method: &MethodInfo, bci: i32) -> Symbol {
    Symbol {
        name: method.function.clone(),
        file: method.file.clone(),
        line: method.line(bci),
    }
}

/// The frame of an inline chain (innermost first, as blazesym's). Its address stands for the chain:
/// encoders keep one location per address in a mapping, so two lines of a method stay two locations,
/// and the same chain seen in two processes is one.
fn named_frame(module: &Arc<Module>, chain: Vec<Symbol>) -> Frame {
    let mut h = DefaultHasher::new();
    chain.hash(&mut h);
    Frame {
        // Below the mapping's limit (u64::MAX), as every address in a mapping is.
        address: h.finish() >> 1,
        kind: FrameKind::User,
        return_address: false,
        module: Some(module.clone()),
        symbols: Arc::from(chain),
    }
}
