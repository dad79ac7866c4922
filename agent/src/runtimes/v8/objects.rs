//! What naming a JavaScript frame needs, read from V8's heap (`heap`): a function (its
//! `SharedFunctionInfo`: name, script, bytecode position table) and compiled code (its `Code`: its
//! function, the functions it inlined, its position table and inlining positions).

use std::sync::Arc;

use sonde_abi::v8::{code_check, sfi_check};

use super::{
    heap::{Heap, MAX_SOURCE, ReadError, is_object, smi, untag},
    positions::{self, SourcePosition},
};

/// Slots of a `ScopeInfo` looked at for the function's name (after the context locals).
const SCOPE_SLOTS: u64 = 16;
/// Bytes of an `InliningPosition` (a `SourcePosition` and the inlined function's index).
const INLINING_POSITION: usize = 16;
/// Most inlined functions read per code object.
const MAX_INLINED: u64 = 1024;
/// What an unnamed function is called in profiles (as V8's own profiler does).
pub(crate) const ANONYMOUS: &str = "(anonymous)";

/// A script: its name and where its lines end.
#[derive(Debug)]
pub(crate) struct Script {
    pub(crate) name: Option<String>,
    pub(crate) line_ends: Vec<u32>,
}

/// A function, as its `SharedFunctionInfo` describes it.
#[derive(Debug)]
pub(crate) struct Function {
    pub(crate) name: String,
    /// `(name_or_scope_info, script)` words, as [`sfi_check`] combines them.
    pub(crate) check: u32,
    /// The tagged `Script` and its source string: what the script cache is keyed by.
    pub(crate) script_key: Option<(u64, u64)>,
    pub(crate) script: Option<Arc<Script>>,
    /// The bytecode's source position table, when the function has bytecode.
    pub(crate) bytecode_positions: Vec<u8>,
}

impl Function {
    /// The line of source position `pos`, else of the function's first position.
    pub(crate) fn line(&self, pos: Option<SourcePosition>) -> Option<u32> {
        let ends = &self.script.as_ref()?.line_ends;
        let offset = pos
            .and_then(SourcePosition::script_offset)
            .or_else(|| positions::position_at(&self.bytecode_positions, 0)?.script_offset())?;
        positions::line_of(ends, offset)
    }

    /// The script's name.
    pub(crate) fn file(&self) -> Option<String> {
        self.script.as_ref()?.name.clone()
    }

    /// Bytes held, for the cache's budget.
    pub(crate) fn size(&self) -> usize {
        self.name.len() + self.bytecode_positions.len() + std::mem::size_of::<Self>()
    }
}

/// Compiled (Maglev, TurboFan) code, as its `Code` object describes it.
#[derive(Debug)]
pub(crate) struct Code {
    /// [`code_check`] of what was read.
    pub(crate) check: u32,
    /// The tagged `SharedFunctionInfo` of the code's own function.
    pub(crate) function: u64,
    /// Tagged `SharedFunctionInfo`s of the functions it inlined, by index.
    pub(crate) inlined: Vec<u64>,
    /// (position of the call, index in `inlined` or -1 for the code's own function), by inlining id.
    pub(crate) inlining: Vec<(SourcePosition, i32)>,
    pub(crate) positions: Vec<u8>,
}

impl Code {
    /// The chain of (function, position) at pc offset `offset`, innermost first: the functions
    /// inlined there, then the code's own.
    pub(crate) fn chain(&self, offset: u64) -> Vec<(u64, Option<SourcePosition>)> {
        let mut chain = Vec::new();
        let mut pos = positions::position_at(&self.positions, offset);
        while let Some(p) = pos {
            let id = p.inlining_id();
            if id == 0 || chain.len() > self.inlining.len() {
                break;
            }
            let Some(&(call, index)) = self.inlining.get(usize::from(id) - 1) else {
                break;
            };
            let function = usize::try_from(index)
                .ok()
                .and_then(|i| self.inlined.get(i).copied())
                .unwrap_or(self.function);
            chain.push((function, Some(p)));
            // The ids of the callers' calls are smaller: anything else is corrupt.
            pos = (call.inlining_id() < id).then_some(call);
        }
        chain.push((self.function, pos));
        chain
    }

    pub(crate) fn size(&self) -> usize {
        self.positions.len() + 16 * self.inlining.len() + 8 * self.inlined.len() + 64
    }
}

impl Heap<'_> {
    /// The function at tagged `sfi`, its script through `script` (a cache: a script's line ends are
    /// read once).
    pub(crate) fn function(
        &self,
        sfi: u64,
        script: impl FnOnce(&Self, (u64, u64)) -> Option<Arc<Script>>,
    ) -> Result<Function, ReadError> {
        let l = self.layout;
        self.typed(sfi, &[l.types.sfi], "a SharedFunctionInfo")?;
        let name_or_scope = self.field(sfi, l.sfi_name_or_scope_info)?;
        let script_word = self.field(sfi, l.sfi_script)?;
        let name = self.function_name(name_or_scope).unwrap_or_default();
        let script_key = match is_object(script_word)
            && self.instance_type(script_word).ok() == Some(l.types.script)
        {
            true => Some((script_word, self.field(script_word, l.script_source)?)),
            false => None,
        };
        let bytecode_positions = self.bytecode_positions(sfi).unwrap_or_default();
        Ok(Function {
            name: if name.is_empty() {
                ANONYMOUS.to_owned()
            } else {
                name
            },
            check: sfi_check(name_or_scope, script_word),
            script: script_key.and_then(|key| script(self, key)),
            script_key,
            bytecode_positions,
        })
    }

    /// The check of the function at tagged `sfi`, as the kernel computes it.
    pub(crate) fn function_check(&self, sfi: u64) -> Result<u32, ReadError> {
        let l = self.layout;
        Ok(sfi_check(
            self.field(sfi, l.sfi_name_or_scope_info)?,
            self.field(sfi, l.sfi_script)?,
        ))
    }

    /// A function's name: the string itself, or (a `ScopeInfo`) the first non-empty string among the
    /// slots after its context locals: the function variable's name, else the name V8 inferred for
    /// an anonymous function (`Module._compile` for `Module.prototype._compile = function ...`), as
    /// V8's own profiler names it (`SharedFunctionInfo::DebugName`). The OpenTelemetry profiler's
    /// heuristic: `ScopeInfo`'s layout has no metadata.
    fn function_name(&self, name_or_scope: u64) -> Result<String, ReadError> {
        let l = self.layout;
        if !is_object(name_or_scope) {
            return Ok(String::new());
        }
        let ty = self.instance_type(name_or_scope)?;
        if ty < l.types.first_nonstring {
            return Ok(self.name(name_or_scope)?.unwrap_or_default());
        }
        if ty != l.types.scope_info {
            return Ok(String::new());
        }
        // HeapObject-based ScopeInfo (V8 9.1 and later): the slots follow the map.
        let raw = self.bytes(untag(name_or_scope)? + 8, (SCOPE_SLOTS * 8) as usize)?;
        let slot = |i: u64| {
            let i = i as usize * 8;
            raw.get(i..i + 8)
                .map(|b| u64::from_le_bytes(b.try_into().expect("8 bytes")))
        };
        let locals = slot(l.scope_context_locals)
            .and_then(smi)
            .unwrap_or(0)
            .max(0) as u64;
        for i in l.scope_first_vars + 2 * locals..SCOPE_SLOTS {
            let Some(word) = slot(i) else { break };
            if is_object(word)
                && let Ok(Some(name)) = self.name(word)
                && !name.is_empty()
            {
                return Ok(name);
            }
        }
        Ok(String::new())
    }

    /// The source position table of the bytecode of the function at `sfi`.
    fn bytecode_positions(&self, sfi: u64) -> Result<Vec<u8>, ReadError> {
        let l = self.layout;
        let mut data = self.field(sfi, l.sfi_function_data)?;
        if self.instance_type(data)? == l.types.code {
            // Sparkplug code in its place (V8 10 and 11): it keeps the bytecode where optimized
            // code keeps its deoptimization data.
            data = self.field(data, l.code_deopt_data)?;
        }
        self.typed(data, &[l.types.bytecode_array], "a BytecodeArray")?;
        for offset in l.bytecode_positions {
            let table = self.field(data, offset)?;
            if is_object(table)
                && let Ok(bytes) = self.byte_array(table)
            {
                return Ok(bytes);
            }
        }
        Err(ReadError::Unexpected("a bytecode position table", data))
    }

    /// The script at `script` (tagged) whose source is `source`: its name and line ends (V8's own
    /// when it computed them, else counted in the source).
    pub(crate) fn script(&self, (script, source): (u64, u64)) -> Result<Script, ReadError> {
        let l = self.layout;
        let name = self.name(self.field(script, l.script_name)?).ok().flatten();
        let ends = self.field(script, l.script_line_ends)?;
        let line_ends = match self.fixed_array(ends, &l.types.fixed_arrays, u64::MAX >> 4) {
            Ok(words) if !words.is_empty() => words
                .into_iter()
                .map(|w| smi(w).unwrap_or(0).max(0) as u32)
                .collect(),
            _ => match self.string(source, MAX_SOURCE)? {
                Some(text) => positions::line_ends(text.as_bytes()),
                None => Vec::new(),
            },
        };
        Ok(Script { name, line_ends })
    }

    /// The compiled code at `code` (untagged, as the kernel stores it).
    pub(crate) fn code(&self, code: u64) -> Result<Code, ReadError> {
        let l = self.layout;
        let tagged = code + 1;
        self.typed(tagged, &[l.types.code], "a Code object")?;
        let start = match l.code_start_is_pointer {
            true => self.field(tagged, l.code_instruction_start)?,
            false => code + l.code_instruction_start,
        };
        let raw = self.bytes(code + l.code_instruction_size, 4)?;
        let size = u32::from_le_bytes(raw.try_into().expect("4 bytes"));
        let positions = self.byte_array(self.field(tagged, l.code_positions)?)?;
        let deopt = self.fixed_array(
            self.field(tagged, l.code_deopt_data)?,
            &l.types.fixed_arrays,
            l.deopt_inlining_positions + 1,
        )?;
        let at = |i: u64| deopt.get(i as usize).copied().unwrap_or(0);
        let function = at(l.deopt_sfi);
        let inlined_count = smi(at(l.deopt_inlined_count))
            .unwrap_or(0)
            .clamp(0, MAX_INLINED as i64) as u64;
        let (inlined, inlining) = if inlined_count > 0 {
            let mut types = l.types.weak_fixed_arrays.clone();
            types.extend(&l.types.fixed_arrays);
            let inlined = self.fixed_array(at(l.deopt_literals), &types, inlined_count)?;
            let raw = self.byte_array(at(l.deopt_inlining_positions))?;
            let inlining = raw
                .chunks_exact(INLINING_POSITION)
                .map(|c| {
                    let pos = u64::from_le_bytes(c[..8].try_into().expect("8 bytes"));
                    let index = i32::from_le_bytes(c[8..12].try_into().expect("4 bytes"));
                    (SourcePosition(pos), index)
                })
                .collect();
            (inlined, inlining)
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Code {
            check: code_check(start, size),
            function,
            inlined,
            inlining,
            positions,
        })
    }
}
