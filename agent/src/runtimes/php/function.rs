//! A PHP function read from the process (a `zend_op_array`): its name as PHP's own backtraces give
//! it (`Class::method`, `function`, `{closure}`, `{main}` for a file's top-level code), its file and
//! its first line.

use super::offsets::{
    CLASS_NAME, FUNC_NAME, FUNC_SCOPE, FUNC_TYPE, Layout, STRING_LEN, STRING_VAL,
};
use crate::runtimes::memory::ProcessMemory;

/// Longest string read: names and paths.
const MAX_LEN: u64 = 4096;

/// What a PHP function's frames are named from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Function {
    pub(crate) name: String,
    pub(crate) file: String,
    /// The line it starts at: its frames' line when the kernel read none.
    pub(crate) first_line: u32,
}

impl Function {
    /// Reads the function at `func`; None when it is not a readable function compiled from PHP.
    pub(crate) fn read(memory: &ProcessMemory, layout: &Layout, func: u64) -> Option<Self> {
        let kind = memory.u64(func + u64::from(FUNC_TYPE)).ok()? as u8;
        let name = match kind {
            sonde_abi::php::USER_FUNCTION => match memory.u64(func + FUNC_NAME).ok()? {
                0 => "{main}".to_owned(),
                at => string(memory, at)?,
            },
            sonde_abi::php::EVAL_CODE => "{eval}".to_owned(),
            _ => return None,
        };
        let name = match memory.u64(func + FUNC_SCOPE).ok()? {
            0 => name,
            class => format!(
                "{}::{name}",
                string(memory, memory.u64(class + CLASS_NAME).ok()?)?
            ),
        };
        let file = string(memory, memory.u64(func + u64::from(layout.filename)).ok()?)?;
        let first_line = memory.u64(func + u64::from(layout.line_start)).ok()? as u32;
        Some(Self {
            name,
            file,
            first_line,
        })
    }
}

/// The `zend_string` at `at`; None when unreadable, too long or not UTF-8.
fn string(memory: &ProcessMemory, at: u64) -> Option<String> {
    if at == 0 {
        return None;
    }
    let len = memory.u64(at + STRING_LEN).ok()?;
    if len > MAX_LEN {
        return None;
    }
    let mut buf = vec![0; len as usize];
    memory.read(at + STRING_VAL, &mut buf).ok()?;
    String::from_utf8(buf).ok()
}
