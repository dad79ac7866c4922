//! The class of a Ruby method, for its frames' names as Ruby 3.4's own backtraces give them
//! (`Split::Burner#burn_b`, `Split::Burner.burn_c`, `block in Split::Burner.burn_c`,
//! `Object#burn_a`).
//!
//! - **Which class.** A method frame's `ep[-2]` is its method entry, which the kernel announces with
//!   the frame's iseq (`sonde_abi::ruby::EP_BEFORE`). The entry's `owner` is the class or module
//!   whose method table holds it: a singleton class for a class's own method (`def self.create`),
//!   whose attached class then names it, with `.`.
//! - **Its name.** Up to 3.1 a class keeps its path only among its instance variables, under the ID
//!   of `__classpath__`, which Ruby interns at start and no table sonde can read exports. sonde
//!   learns that ID once per process from `Object`, whose variables hold one string, `"Object"`
//!   (`rb_cObject` is exported). 3.2 moved class variables to object shapes and 3.3 the path to a
//!   field of its own; neither runs here to test, so from 3.2 frames keep their bare labels.
//! - **A block** takes its method's class, looked up by the method's body when frames are named: its
//!   own frame has no method entry, and the method was announced with its entry by then.

use super::{offsets::Layout, strings};
use crate::runtimes::memory::ProcessMemory;

/// `RBasic.flags & T_MASK`: the object's type.
const T_MASK: u64 = 0x1f;
const T_CLASS: u64 = 0x02;
const T_MODULE: u64 = 0x03;
const T_IMEMO: u64 = 0x1a;
/// `FL_SINGLETON` (`FL_USER0`) in a class's flags, up to 3.1: the versions whose class paths are
/// read (3.4 moved it to `FL_USER1`).
const FL_SINGLETON: u64 = 1 << 12;
/// An internal object's kind (`imemo_type`, 4 bits from `FL_USHIFT`): a method entry.
const IMEMO_SHIFT: u32 = 12;
const IMEMO_MENT: u64 = 6;
/// ... or special variables (`imemo_svar`), whose `cref_or_me` is the method entry.
const IMEMO_SVAR: u64 = 2;
const SVAR_CREF_OR_ME: u64 = 8;
/// `rb_callable_method_entry_t.owner`.
const ENTRY_OWNER: u64 = 32;
/// Up to 3.1: `RClass.ptr` (its `rb_classext_t`) and `rb_classext_t.iv_tbl` (an `st_table`).
const CLASS_EXT: u64 = 24;
const EXT_IV_TBL: u64 = 8;
/// `st_table`: `num_entries`, `entries_start`, `entries_bound`, `entries`; each entry is `hash key
/// record`.
const ST_ENTRIES_START: u64 = 32;
const ST_ENTRIES: u64 = 48;
const ST_ENTRY: u64 = 24;
/// Instance variables read of one class at most (a class's own are few; more is not a class).
const MAX_VARIABLES: u64 = 256;

/// A method's class as its frames are named by.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct MethodClass {
    /// `Foo::Bar`.
    pub(crate) path: String,
    /// A class's own method (`Foo.create`), rather than its instances' (`Foo#create`).
    pub(crate) class_method: bool,
}

impl MethodClass {
    /// `method` of this class, as Ruby names it.
    pub(crate) fn name(&self, method: &str) -> String {
        let separator = if self.class_method { '.' } else { '#' };
        format!("{}{separator}{method}", self.path)
    }
}

/// Reads class paths of one process: its `__classpath__` ID, learned from `Object`.
pub(crate) struct ClassPaths<'a> {
    memory: &'a ProcessMemory,
    layout: &'a Layout,
    classpath_id: u64,
}

impl<'a> ClassPaths<'a> {
    /// The reader of a process whose `Object` class is in the variable at `object_class`; None when
    /// its version keeps no path sonde reads, or `Object` has none yet (the VM starting).
    pub(crate) fn learn(
        memory: &'a ProcessMemory,
        layout: &'a Layout,
        object_class: u64,
    ) -> Option<Self> {
        if !layout.class_paths_in_variables || object_class == 0 {
            return None;
        }
        let object = memory.u64(object_class).ok()?;
        let variables = variables(memory, object)?;
        let (classpath_id, _) = variables.into_iter().find(|&(_, value)| {
            strings::string(memory, layout, value).as_deref() == Some("Object")
        })?;
        Some(Self {
            memory,
            layout,
            classpath_id,
        })
    }

    /// The ID learned.
    pub(crate) fn id(&self) -> u64 {
        self.classpath_id
    }

    /// The reader of a process whose `__classpath__` ID was learned before.
    pub(crate) fn with_id(memory: &'a ProcessMemory, layout: &'a Layout, id: u64) -> Self {
        Self {
            memory,
            layout,
            classpath_id: id,
        }
    }

    /// The class of the method entry at `entry`; None when it is not a method entry, or its class
    /// has no path (anonymous).
    pub(crate) fn of_entry(&self, entry: u64) -> Option<MethodClass> {
        let imemo = |at: u64| {
            let flags = self.memory.u64(at).ok()?;
            (flags & T_MASK == T_IMEMO).then_some((flags >> IMEMO_SHIFT) & 0xf)
        };
        // A method that used `$~` or `$_` keeps them in a `vm_svar` there, which holds the entry.
        let entry = match imemo(entry)? {
            IMEMO_SVAR => self.memory.u64(entry + SVAR_CREF_OR_ME).ok()?,
            _ => entry,
        };
        if imemo(entry)? != IMEMO_MENT {
            return None;
        }
        let owner = self.memory.u64(entry + ENTRY_OWNER).ok()?;
        let class = self.memory.u64(owner).ok()?;
        if class & T_MASK == T_CLASS && class & FL_SINGLETON != 0 {
            // A singleton class's variables hold its attached object (`__attached__`): the class
            // or module whose own method this is.
            let attached = variables(self.memory, owner)?
                .into_iter()
                .map(|(_, value)| value)
                .find(|&v| is_heap(v) && self.memory.u64(v).is_ok_and(is_class_or_module))?;
            return Some(MethodClass {
                path: self.path(attached)?,
                class_method: true,
            });
        }
        Some(MethodClass {
            path: self.path(owner)?,
            class_method: false,
        })
    }

    /// The path of the class or module at `class`.
    fn path(&self, class: u64) -> Option<String> {
        let variables = variables(self.memory, class)?;
        let (_, value) = variables
            .into_iter()
            .find(|&(k, _)| k == self.classpath_id)?;
        strings::string(self.memory, self.layout, value)
    }
}

/// The instance variables of the class at `class` (up to 3.1): (ID, value).
fn variables(memory: &ProcessMemory, class: u64) -> Option<Vec<(u64, u64)>> {
    let ext = memory.u64(class + CLASS_EXT).ok()?;
    let table = memory.u64(ext + EXT_IV_TBL).ok()?;
    if table == 0 {
        return None;
    }
    let mut header = [0u8; 56];
    memory.read(table, &mut header).ok()?;
    let word =
        |at: u64| u64::from_le_bytes(header[at as usize..at as usize + 8].try_into().unwrap());
    let (start, bound, entries) = (
        word(ST_ENTRIES_START),
        word(ST_ENTRIES_START + 8),
        word(ST_ENTRIES),
    );
    if bound < start || bound - start > MAX_VARIABLES {
        return None;
    }
    let mut raw = vec![0u8; ((bound - start) * ST_ENTRY) as usize];
    memory.read(entries + start * ST_ENTRY, &mut raw).ok()?;
    let u64_at = |b: &[u8]| u64::from_le_bytes(b.try_into().unwrap());
    Some(
        raw.chunks_exact(ST_ENTRY as usize)
            .map(|e| (u64_at(&e[8..16]), u64_at(&e[16..24])))
            // Deleted entries keep their slot with the key `Qundef`'s hash reserved: skip empties.
            .filter(|&(key, value)| key != 0 && value != 0)
            .collect(),
    )
}

/// Whether `v` is a heap object's address (not an immediate: a Fixnum, a Symbol, `nil`...).
fn is_heap(v: u64) -> bool {
    v & 7 == 0 && v > 8
}

fn is_class_or_module(flags: u64) -> bool {
    matches!(flags & T_MASK, T_CLASS | T_MODULE)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_rubys_own_backtraces() {
        let class = |class_method| MethodClass {
            path: "Split::Burner".into(),
            class_method,
        };
        assert_eq!(class(false).name("burn_b"), "Split::Burner#burn_b");
        assert_eq!(class(true).name("burn_c"), "Split::Burner.burn_c");
        assert!(is_heap(0x7f00_0000_1000) && !is_heap(8) && !is_heap(0x15) && !is_heap(0));
    }
}
