//! Reads one Java method out of a JVM at a `Method*` the kernel stored (an interpreted frame) or an
//! nmethod's debug information names (compiled code, inlined calls): its class (`ConstMethod ->
//! ConstantPool -> pool holder -> Klass::_name`), name (the constant pool entry at
//! `ConstMethod::_name_index`), source file (`_source_file_name_index`) and line number table (after
//! the bytecodes, `lines`).
//!
//! Addresses may be stale or garbage: every read is bounded (structure sizes from `layout`, names at
//! most [`MAX_NAME`] bytes, pool indexes below the pool's length) and every failure is an error.

use std::io;

use sonde_abi::hotspot::interpreted_check;

use super::{
    layout::{Layout, PoolIndex},
    lines::{LineError, LineTable},
};
use crate::runtimes::memory::ProcessMemory;

/// Longest class, method or file name read (bytes of modified UTF-8).
pub(crate) const MAX_NAME: usize = 4096;

/// Why something of the JVM could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReadError {
    /// The memory could not be read (a bad or stale pointer, or the process is gone).
    #[error("cannot read the {what} at {addr:#x} in the JVM (gone, or a bad pointer): {source}")]
    Memory {
        /// What was read.
        what: &'static str,
        /// Where.
        addr: u64,
        /// The read's error.
        #[source]
        source: io::Error,
    },
    /// A value no live object holds.
    #[error("the {what} at {addr:#x} is not plausible: {why}")]
    Implausible {
        /// What was read.
        what: &'static str,
        /// Where.
        addr: u64,
        /// What is wrong with it.
        why: String,
    },
}

impl From<LineError> for ReadError {
    fn from(e: LineError) -> Self {
        match e {
            LineError::Memory { addr, source } => ReadError::Memory {
                what: "line number table",
                addr,
                source,
            },
            LineError::Corrupt { addr } => ReadError::Implausible {
                what: "line number table",
                addr,
                why: "it does not decode".into(),
            },
        }
    }
}

/// One Java method, as named in profiles.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MethodInfo {
    /// Its `ConstMethod*` when read.
    pub(crate) const_method: u64,
    /// The `Symbol*` of its class's name when read (with `const_method`, the kernel's check).
    pub(crate) class_name: u64,
    /// `package.Class.method`.
    pub(crate) function: String,
    /// The source file's name (`Burner.java`), when the class has one.
    pub(crate) file: Option<String>,
    /// Its line number table (empty without one).
    pub(crate) lines: LineTable,
    /// Bytes of bytecode: a bci beyond it has no line.
    pub(crate) code_size: u16,
}

impl MethodInfo {
    /// The kernel's validation value for this method.
    pub(crate) fn check(&self) -> u32 {
        interpreted_check(self.const_method, self.class_name)
    }

    /// The line of bytecode index `bci` (-1: the method's entry).
    pub(crate) fn line(&self, bci: i32) -> Option<u32> {
        (bci < i32::from(self.code_size))
            .then(|| self.lines.line(bci))
            .flatten()
    }

    /// Bytes held, for the cache's budget.
    pub(crate) fn size(&self) -> usize {
        self.function.len() + self.file.as_ref().map_or(0, String::len) + 8 * self.lines.len()
    }
}

/// Reads methods of one JVM.
pub(crate) struct MethodReader<'a> {
    mem: ProcessMemory,
    layout: &'a Layout,
}

impl<'a> MethodReader<'a> {
    /// Reads methods of the JVM of `layout` in process `pid`.
    pub(crate) fn new(pid: u32, layout: &'a Layout) -> Self {
        Self {
            mem: ProcessMemory::new(pid),
            layout,
        }
    }

    /// `Method::_constMethod` of the method at `method`.
    pub(crate) fn const_method(&self, method: u64) -> Result<u64, ReadError> {
        let at = method.wrapping_add(self.layout.method.const_method);
        self.mem.u64(at).map_err(memory("method", method))
    }

    /// The check of the method at `method` as it is now, read as the kernel reads it.
    pub(crate) fn check(&self, method: u64) -> Result<u32, ReadError> {
        let cm = self.const_method(method)?;
        let at = cm.wrapping_add(self.layout.method.cm_constants);
        let pool = self.mem.u64(at).map_err(memory("ConstMethod", cm))?;
        let holder = self
            .mem
            .u64(pool.wrapping_add(self.layout.pool.holder))
            .map_err(memory("constant pool", pool))?;
        let name = self
            .mem
            .u64(holder.wrapping_add(self.layout.pool.klass_name))
            .map_err(memory("class", holder))?;
        Ok(interpreted_check(cm, name))
    }

    /// The method at `method`.
    pub(crate) fn read(&self, method: u64) -> Result<MethodInfo, ReadError> {
        let m = &self.layout.method;
        let p = &self.layout.pool;
        let cm = self.const_method(method)?;
        let cm_bytes = self.bytes(cm, m.cm_size, "ConstMethod")?;
        let constants = le_u64(&cm_bytes, m.cm_constants);
        let flags = le_u16(&cm_bytes, m.cm_flags);
        let code_size = le_u16(&cm_bytes, m.cm_code_size);
        let name_index = le_u16(&cm_bytes, m.cm_name_index);
        let pool = self.bytes(constants, p.size, "constant pool")?;
        let holder = le_u64(&pool, p.holder);
        let length = i32::from_le_bytes(pool[p.length as usize..][..4].try_into().expect("4"));
        let klass_name = self
            .mem
            .u64(holder.wrapping_add(p.klass_name))
            .map_err(memory("class", holder))?;
        let class = self.symbol(klass_name, "class name")?;
        let pool_symbol = |index: u16, what: &'static str| -> Result<String, ReadError> {
            if index == 0 || i32::from(index) >= length {
                return Err(ReadError::Implausible {
                    what,
                    addr: constants,
                    why: format!("index {index} in a pool of {length} entries"),
                });
            }
            // Entries follow the pool's header, one word each.
            let at = constants + p.size + 8 * u64::from(index);
            let entry = self.mem.u64(at).map_err(memory(what, at))?;
            // Older JDKs tagged an unresolved entry's low bit; a Symbol* is aligned either way.
            self.symbol(entry & !1, what)
        };
        let name = pool_symbol(name_index, "method name")?;
        let file_index = match p.source_file_index {
            PoolIndex::InPool(off) => le_u16(&pool, off),
            PoolIndex::InHolder(off) => {
                let mut b = [0; 2];
                let at = holder.wrapping_add(off);
                self.mem.read(at, &mut b).map_err(memory("class", holder))?;
                u16::from_le_bytes(b)
            }
        };
        // A class without a SourceFile attribute (generated code, lambdas) has index 0.
        let file = match file_index {
            0 => None,
            i => Some(pool_symbol(i, "source file name")?),
        };
        let lines = match flags & m.has_line_table != 0 {
            true => LineTable::read(
                &self.mem,
                cm + m.cm_size + u64::from(code_size),
                self.layout.unsigned5_excluded,
            )?,
            false => LineTable::default(),
        };
        Ok(MethodInfo {
            const_method: cm,
            class_name: klass_name,
            function: format!("{}.{name}", java_class_name(&class)),
            file,
            lines,
            code_size,
        })
    }

    /// `len` bytes at `addr` (a structure header, `len` bounded by `layout`).
    fn bytes(&self, addr: u64, len: u64, what: &'static str) -> Result<Vec<u8>, ReadError> {
        let mut buf = vec![0; len as usize];
        self.mem.read(addr, &mut buf).map_err(memory(what, addr))?;
        Ok(buf)
    }

    /// The text of the `Symbol` at `addr`.
    fn symbol(&self, addr: u64, what: &'static str) -> Result<String, ReadError> {
        let p = &self.layout.pool;
        let mut len = [0; 2];
        self.mem
            .read(addr.wrapping_add(p.symbol_length), &mut len)
            .map_err(memory(what, addr))?;
        let len = usize::from(u16::from_le_bytes(len));
        if len == 0 || len > MAX_NAME {
            return Err(ReadError::Implausible {
                what,
                addr,
                why: format!("{len} bytes long"),
            });
        }
        let mut body = vec![0; len];
        self.mem
            .read(addr.wrapping_add(p.symbol_body), &mut body)
            .map_err(memory(what, addr))?;
        // Modified UTF-8: real names have no NUL and no control characters; garbage has.
        if body.iter().any(|&b| b < 0x20) {
            return Err(ReadError::Implausible {
                what,
                addr,
                why: "control characters in a name".into(),
            });
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    }
}

/// A class's name as Java writes it: `java/util/HashMap$Node` -> `java.util.HashMap$Node`. A hidden
/// class (lambdas, JDK 15+) carries its address after a `+` (`Foo$$Lambda$14+0x0000000800c03000`):
/// it is left out, so one lambda is one function across processes and restarts.
pub(crate) fn java_class_name(internal: &str) -> String {
    let name = match internal.rsplit_once('+') {
        Some((name, addr))
            if addr.len() > 2
                && addr.starts_with("0x")
                && addr[2..].bytes().all(|b| b.is_ascii_hexdigit()) =>
        {
            name
        }
        _ => internal,
    };
    name.replace('/', ".")
}

fn memory(what: &'static str, addr: u64) -> impl FnOnce(io::Error) -> ReadError {
    move |source| ReadError::Memory { what, addr, source }
}

/// The little-endian u64 at `off` in `buf` (offsets checked by `Layout::check`).
pub(crate) fn le_u64(buf: &[u8], off: u64) -> u64 {
    u64::from_le_bytes(buf[off as usize..][..8].try_into().expect("8 bytes"))
}

/// The little-endian u16 at `off` in `buf` (offsets checked by `Layout::check`).
fn le_u16(buf: &[u8], off: u64) -> u16 {
    u16::from_le_bytes(buf[off as usize..][..2].try_into().expect("2 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_names_read_as_java_writes_them() {
        assert_eq!(
            java_class_name("com/sun/tools/javac/parser/JavacParser"),
            "com.sun.tools.javac.parser.JavacParser"
        );
        assert_eq!(
            java_class_name("java/util/HashMap$Node"),
            "java.util.HashMap$Node"
        );
        assert_eq!(
            java_class_name("app/Main$$Lambda$14+0x0000000800c03000"),
            "app.Main$$Lambda$14"
        );
        assert_eq!(java_class_name("a/B+c"), "a.B+c", "not an address");
    }
}
