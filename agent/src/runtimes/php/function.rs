//! A PHP function read from the process (a `zend_op_array`): its name as PHP's own backtraces give
//! it (`Class::method`, `function`, `{closure}`, `{main}` for a file's top-level code), its file and
//! its lines.

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
    /// The lines it spans.
    pub(crate) first_line: u32,
    pub(crate) last_line: u32,
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
        // `line_start` and `line_end`, adjacent.
        let lines = memory.u64(func + u64::from(layout.line_start)).ok()?;
        Some(Self {
            name,
            file,
            first_line: lines as u32,
            last_line: (lines >> 32) as u32,
        })
    }

    /// The line of a frame whose saved opline is at `line`. The executor keeps the running frame's
    /// opline in a register and saves it only before a call, so the running frame's saved opline may
    /// be its previous one, or, on a frame just entered, the last one of whatever frame used that
    /// VM-stack slot before (another function's line): a line outside the function is taken as its
    /// first line.
    pub(crate) fn line(&self, line: u32) -> u32 {
        if (self.first_line..=self.last_line).contains(&line) {
            line
        } else {
            self.first_line
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_outside_the_function_is_its_first() {
        let f = Function {
            name: "burn_c".into(),
            file: "split.php".into(),
            first_line: 38,
            last_line: 41,
        };
        assert_eq!((f.line(40), f.line(38), f.line(41)), (40, 38, 41));
        assert_eq!((f.line(11), f.line(0), f.line(42)), (38, 38, 38));
    }
}
