//! Names the JavaScript frames the kernel stored in user stacks (`sonde_abi::v8`): each function and
//! code object is read once from its process (`objects`) and cached with the frames built from it.
//!
//! Every frame is validated before it is named, since V8's garbage collector moves and frees objects:
//! a function's `name_or_scope_info` and `script` words, a code object's instruction start and size,
//! must be what the kernel saw; a cached object that no longer matches is read again, and a frame that
//! still does not match is stale: counted and left unnamed in `[js]`, never named after what lives
//! there now. The kernel announces each object as it first walks it (`proc_event::RUNTIME_FRAME`),
//! so most are read before the window's end could see them move.
//!
//! The cache over processes, its budget and its frames are `runtimes::frame_names`'s, shared with
//! HotSpot's names; this file is what V8 reads of one process ([`Process`]) and how it names a frame.

use std::{
    collections::HashMap,
    hash::{DefaultHasher, Hash as _, Hasher as _},
    sync::Arc,
};

use sonde_abi::v8::{V8Frame, kind};

use super::{
    detect::Node,
    heap::{Heap, ReadError},
    objects::{Code, Function, Script},
    positions::SourcePosition,
};
use crate::{
    profile::{Frame, FrameKind, Module, Symbol},
    runtimes::{
        Outcome,
        frame_names::{FrameNames, ProcessCache},
    },
};

/// Pseudo path of the mapping every JavaScript frame is in.
pub(crate) const JS_PATH: &str = "[js]";
/// What a V8 builtin's name starts with in profiles (`[v8 builtin] InterpreterEntryTrampoline`).
pub(crate) const BUILTIN_PREFIX: &str = "[v8 builtin] ";
/// What a frame of V8 code without a name starts with, followed by its frame type.
pub(crate) const FRAME_PREFIX: &str = "[v8 frame] ";

/// The JavaScript frame cache.
pub(crate) type V8Names = FrameNames<Process>;

/// What was read of one process: functions, code objects and scripts.
pub(crate) struct Process {
    node: Arc<Node>,
    /// By tagged `SharedFunctionInfo` address.
    functions: HashMap<u64, Result<Arc<Function>, Outcome>>,
    /// By (`Code` address, check).
    code: HashMap<(u64, u32), Result<Arc<Code>, Outcome>>,
    /// By (tagged `Script`, its source string).
    scripts: HashMap<(u64, u64), Option<Arc<Script>>>,
    bytes: usize,
}

impl ProcessCache for Process {
    type Runtime = Node;
    const PATH: &'static str = JS_PATH;
    const WHAT: &'static str = "JavaScript";
    const MAX_ENTRIES: usize = 100_000;
    /// Names, tables and line ends.
    const MAX_BYTES: usize = 256 << 20;

    fn new(node: &Arc<Node>) -> Self {
        Self {
            node: node.clone(),
            functions: HashMap::new(),
            code: HashMap::new(),
            scripts: HashMap::new(),
            bytes: 0,
        }
    }

    fn runtime(&self) -> &Arc<Node> {
        &self.node
    }

    fn entries(&self) -> usize {
        self.functions.len() + self.code.len() + self.scripts.len()
    }

    fn bytes(&self) -> usize {
        self.bytes
    }

    /// Reads the function or code of `frame` before the garbage collector moves it.
    fn preload(&mut self, pid: u32, frame: V8Frame) {
        let _ = match frame.kind {
            kind::BYTECODE | kind::FUNCTION => {
                function(pid, self, frame.address + 1, Some(frame.check)).map(|_| ())
            }
            kind::CODE => code(pid, self, frame.address, frame.check).map(|_| ()),
            _ => Ok(()),
        };
    }

    fn name(&mut self, pid: u32, frame: V8Frame, module: &Arc<Module>) -> Result<Frame, Outcome> {
        name(pid, self, frame, module)
    }

    fn forget_failures(&mut self) {
        self.functions.retain(|_, f| f.is_ok());
        self.code.retain(|_, c| c.is_ok());
    }
}

/// The name of a frame of V8 code the kernel stored with its pc (`kind::MARKER`): the builtin the
/// native symbols name (`Builtins_JSEntry` becomes `[v8 builtin] JSEntry`), else its frame type.
pub(crate) fn marker_name(native: Option<&str>, node: &Node, frame_type: u64) -> String {
    match native {
        Some(name) => match name.strip_prefix("Builtins_") {
            Some(builtin) => format!("{BUILTIN_PREFIX}{builtin}"),
            None => name.to_owned(),
        },
        None => match node.layout.frame_type(frame_type) {
            Some(t) => format!("{FRAME_PREFIX}{t}"),
            None => format!("{FRAME_PREFIX}{frame_type}"),
        },
    }
}

/// Names `frame` of `pid` from `process`'s cache, reading what is missing.
fn name(
    pid: u32,
    process: &mut Process,
    frame: V8Frame,
    module: &Arc<Module>,
) -> Result<Frame, Outcome> {
    let chain: Vec<Symbol> = match frame.kind {
        kind::BYTECODE => {
            let f = function(pid, process, frame.address + 1, Some(frame.check))?;
            // The frame holds the offset from the BytecodeArray's tagged address.
            let header = process.node.layout.bytecode_data - 1;
            let offset = u64::from(frame.position).checked_sub(header);
            let pos = offset.and_then(|o| super::positions::position_at(&f.bytecode_positions, o));
            vec![symbol(&f, pos)]
        }
        kind::FUNCTION => {
            let f = function(pid, process, frame.address + 1, Some(frame.check))?;
            vec![symbol(&f, None)]
        }
        kind::CODE => {
            let c = code(pid, process, frame.address, frame.check)?;
            // A return address points after the call: its position is the call's.
            let offset = u64::from(frame.position).saturating_sub(u64::from(!frame.exact));
            let mut chain = Vec::new();
            for (sfi, pos) in c.chain(offset) {
                // The code was just validated: the functions it names are live.
                let f = function(pid, process, sfi, None)?;
                chain.push(symbol(&f, pos));
            }
            chain
        }
        // Markers are named by the symbolizer (native symbols); anything else is a corrupt word.
        _ => return Err(Outcome::Unreadable),
    };
    Ok(named_frame(module, chain))
}

/// The function at tagged `sfi`, read unless cached; checked against `expect` (the kernel's value)
/// when given, else against itself as it is now.
fn function(
    pid: u32,
    process: &mut Process,
    sfi: u64,
    expect: Option<u32>,
) -> Result<Arc<Function>, Outcome> {
    let node = process.node.clone();
    let heap = Heap::new(pid, &node.layout);
    let expected = match expect {
        Some(check) => check,
        None => heap.function_check(sfi).map_err(|e| failed(pid, &e))?,
    };
    match process.functions.get(&sfi) {
        Some(Ok(f)) if f.check == expected => return Ok(f.clone()),
        Some(Err(outcome)) => return Err(*outcome),
        _ => {}
    }
    if expect.is_some() && heap.function_check(sfi).map_err(|e| failed(pid, &e))? != expected {
        return Err(Outcome::Stale);
    }
    let scripts = &mut process.scripts;
    let read = heap
        .function(sfi, |heap, key| {
            scripts
                .entry(key)
                .or_insert_with(|| heap.script(key).ok().map(Arc::new))
                .clone()
        })
        .map(Arc::new)
        .map_err(|e| failed(pid, &e));
    if let Ok(f) = &read {
        process.bytes += f.size();
        if let Some(key) = f.script_key
            && let Some(Some(script)) = process.scripts.get(&key)
            && f.script.is_some()
        {
            // Counted once per script, when its first function is read.
            if Arc::strong_count(script) <= 2 {
                process.bytes += 4 * script.line_ends.len();
            }
        }
    }
    process.functions.insert(sfi, read.clone());
    match read? {
        f if f.check == expected => Ok(f),
        // Changed between the two reads: moved right now.
        _ => Err(Outcome::Stale),
    }
}

/// The code the kernel saw at `addr` with check `check`: cached, else read now if that code still
/// lives there (stale if other code does).
fn code(pid: u32, process: &mut Process, addr: u64, check: u32) -> Result<Arc<Code>, Outcome> {
    if let Some(cached) = process.code.get(&(addr, check)) {
        return cached.clone();
    }
    let node = process.node.clone();
    let heap = Heap::new(pid, &node.layout);
    let read = heap.code(addr).map(Arc::new).map_err(|e| failed(pid, &e));
    let c = match read {
        Ok(c) => c,
        Err(outcome) => {
            process.code.insert((addr, check), Err(outcome));
            return Err(outcome);
        }
    };
    process.bytes += c.size();
    process.code.insert((addr, c.check), Ok(c.clone()));
    if c.check != check {
        process.code.insert((addr, check), Err(Outcome::Stale));
        return Err(Outcome::Stale);
    }
    // Its functions now, while the code that names them is known to be live.
    for sfi in std::iter::once(c.function).chain(c.inlined.iter().copied()) {
        let _ = function(pid, process, sfi, None);
    }
    Ok(c)
}

fn failed(pid: u32, e: &ReadError) -> Outcome {
    tracing::debug!(pid, "JavaScript frame left unnamed: {e}");
    Outcome::Unreadable
}

fn symbol(f: &Function, pos: Option<SourcePosition>) -> Symbol {
    Symbol {
        name: f.name.clone(),
        file: f.file(),
        line: f.line(pos),
    }
}

/// The frame of an inline chain (innermost first); its address stands for the chain (as Java's).
fn named_frame(module: &Arc<Module>, chain: Vec<Symbol>) -> Frame {
    let mut h = DefaultHasher::new();
    chain.hash(&mut h);
    Frame {
        address: h.finish() >> 1,
        kind: FrameKind::User,
        return_address: false,
        module: Some(module.clone()),
        symbols: Arc::from(chain),
    }
}
