//! The V8 structures sonde reads, located through the `v8dbg_*` constants `node` exports
//! (`super::elf`). V8's postmortem metadata is incomplete and its names change between versions,
//! so a few fields come from V8's own layout of the versions Node 18, 20 and 22 ship (V8 10.2, 11.3
//! and 12.4), each said where it is used; the OpenTelemetry eBPF profiler, which walks V8 the same
//! way, derives them alike.
//!
//! Supported: V8 10 to 12 on x86_64 with 64-bit Smis (Node.js builds V8 without pointer
//! compression). Other versions (Node 16 and older, Node 23 and newer) are refused with the reason.

use std::collections::BTreeMap;

use super::elf::V8Symbols;

/// V8 major versions sonde walks (Node 18: 10.2, Node 20: 11.3, Node 22: 12.4).
pub(crate) const SUPPORTED_MAJORS: std::ops::RangeInclusive<u32> = 10..=12;

/// x86_64: pointers are 8 bytes.
const POINTER: u64 = 8;

/// Instance types of the objects sonde tells apart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Types {
    /// `JSFunction` and its subclasses (`first..=last`).
    pub(crate) js_function: (u16, u16),
    pub(crate) sfi: u16,
    pub(crate) code: u16,
    pub(crate) script: u16,
    pub(crate) scope_info: u16,
    pub(crate) bytecode_array: u16,
    /// Strings have instance types below this.
    pub(crate) first_nonstring: u16,
    /// `FixedArray` and its trusted variants (deoptimization data, line ends).
    pub(crate) fixed_arrays: Vec<u16>,
    /// `ByteArray` and its trusted variant (position tables, inlining positions).
    pub(crate) byte_arrays: Vec<u16>,
    /// `WeakFixedArray` and its trusted variant (the deoptimization literals).
    pub(crate) weak_fixed_arrays: Vec<u16>,
}

/// String representations (`instance_type & repr_mask`) and encodings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Strings {
    pub(crate) repr_mask: u16,
    pub(crate) encoding_mask: u16,
    pub(crate) one_byte: u16,
    pub(crate) seq: u16,
    pub(crate) cons: u16,
    pub(crate) sliced: u16,
    pub(crate) thin: u16,
    /// `String::length` (an int).
    pub(crate) length: u64,
    /// First character of a sequential string.
    pub(crate) chars: u64,
    pub(crate) cons_first: u64,
    pub(crate) cons_second: u64,
    pub(crate) thin_actual: u64,
    pub(crate) sliced_parent: u64,
    pub(crate) sliced_offset: u64,
}

/// Where the fields sonde reads are, and what the kernel needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Layout {
    /// V8's (major, minor, build).
    pub(crate) version: (u32, u32, u32),
    pub(crate) types: Types,
    pub(crate) strings: Strings,
    /// Bytes below rbp of the frame slots (x86_64).
    pub(crate) fp_marker: u16,
    pub(crate) fp_function: u16,
    pub(crate) fp_bytecode_offset: u16,
    pub(crate) map_instance_type: u64,
    pub(crate) js_function_shared: u64,
    pub(crate) js_function_code: u64,
    pub(crate) sfi_name_or_scope_info: u64,
    pub(crate) sfi_function_data: u64,
    pub(crate) sfi_script: u64,
    pub(crate) script_name: u64,
    pub(crate) script_source: u64,
    pub(crate) script_line_ends: u64,
    /// `FixedArrayBase::length` (a Smi) and the first element of a fixed array.
    pub(crate) array_length: u64,
    pub(crate) array_data: u64,
    /// First bytecode of a `BytecodeArray`.
    pub(crate) bytecode_data: u64,
    /// Where a `BytecodeArray`'s source position table may be (the metadata lost it in V8 9.4; the
    /// one holding a byte array is taken).
    pub(crate) bytecode_positions: [u64; 2],
    pub(crate) code_instruction_start: u64,
    /// The instructions start at that field's value (V8 11+), not at that offset in the object.
    pub(crate) code_start_is_pointer: bool,
    pub(crate) code_instruction_size: u64,
    pub(crate) code_flags: u64,
    pub(crate) code_kind_mask: u32,
    pub(crate) code_kind_shift: u32,
    /// `CodeKind::BASELINE`; Maglev and TurboFan follow it.
    pub(crate) code_kind_baseline: u32,
    pub(crate) code_positions: u64,
    pub(crate) code_deopt_data: u64,
    /// Indexes in the deoptimization data.
    pub(crate) deopt_inlined_count: u64,
    pub(crate) deopt_literals: u64,
    pub(crate) deopt_sfi: u64,
    pub(crate) deopt_inlining_positions: u64,
    /// `ScopeInfo` slots: the first variable, and the context local count.
    pub(crate) scope_first_vars: u64,
    pub(crate) scope_context_locals: u64,
    /// Frame type names by marker value (`v8dbg_frametype_*`, without `Frame`).
    pub(crate) frame_types: BTreeMap<u64, String>,
}

impl Layout {
    /// The layout described by `s`, or why sonde does not walk this V8.
    pub(crate) fn new(s: &V8Symbols) -> Result<Self, String> {
        let version = s
            .version
            .ok_or("its V8 version (v8::internal::Version) is not in the file")?;
        if !SUPPORTED_MAJORS.contains(&version.0) {
            return Err(format!(
                "sonde walks V8 {}.x to {}.x (Node.js 18 to 22), not {}.{}",
                SUPPORTED_MAJORS.start(),
                SUPPORTED_MAJORS.end(),
                version.0,
                version.1
            ));
        }
        let get = |names: &[&str]| names.iter().find_map(|n| s.get(n));
        let need = |names: &[&str]| {
            get(names).ok_or_else(|| format!("the V8 constant v8dbg_{} is missing", names[0]))
        };
        let off = |names: &[&str]| need(names).map(u64::from);
        let ty = |names: &[&str]| need(names).map(|v| v as u16);
        // 64-bit Smis and tagged pointers (no pointer compression): what the kernel assumes.
        let tags = (
            get(&["HeapObjectTag"]),
            get(&["HeapObjectTagMask"]),
            get(&["SmiTagMask"]),
            get(&["SmiShiftSize"]),
        );
        if tags != (Some(1), Some(3), Some(1), Some(31)) {
            return Err(format!(
                "its tagging scheme {tags:?} is not 64-bit Smis without pointer compression"
            ));
        }
        let below = |names: &[&str]| -> Result<u16, String> {
            let v = need(names)? as i32;
            u16::try_from(-v)
                .ok()
                .filter(|b| *b > 0 && b % 8 == 0 && u32::from(*b) <= sonde_abi::v8::FRAME_SPAN)
                .ok_or_else(|| format!("its frame slot v8dbg_{} = {v} is unexpected", names[0]))
        };
        let older = |major: u32, minor: u32, build: u32| version < (major, minor, build);
        let js_function = ty(&["type_JSFunction__JS_FUNCTION_TYPE"])?;
        let js_function_last = match get(&["LastJSFunctionType"]) {
            Some(last) => last as u16,
            // V8 9.6.138 to 12: JSFunction and 14 constructor subclasses.
            None => js_function + 14,
        };
        let shared = off(&[
            "class_JSFunction__shared__SharedFunctionInfo",
            "class_JSFunction__shared__Tagged_SharedFunctionInfo_",
        ])?;
        let js_function_code = match get(&[
            "class_JSFunction__code__CodeT",
            "class_JSFunction__code__Tagged_Code_",
            "class_JSFunction__code__Code",
        ]) {
            Some(v) => u64::from(v),
            // Lost from the metadata in V8 11: 3 words after `shared` until 11.7.368, 1 before since.
            None if older(11, 7, 368) => shared + 3 * POINTER,
            None => shared - POINTER,
        };
        let code_flags = off(&["class_Code__flags__uint32_t"]).or_else(|_| {
            // V8 11.3: the Code metadata was dropped; the flags follow the instruction start.
            off(&["class_Code__source_position_table__ByteArray"]).map(|p| p + 3 * POINTER)
        })?;
        let (code_instruction_start, code_start_is_pointer) = match (
            get(&["class_Code__instruction_start__uintptr_t"]),
            get(&["class_Code__instruction_start__Address"]),
        ) {
            (Some(v), _) if version.0 < 11 => (u64::from(v), false),
            (_, Some(v)) => (u64::from(v), true),
            // V8 11.3: a pointer field, one word before the flags.
            _ => (code_flags - POINTER, true),
        };
        let code_instruction_size = match get(&["class_Code__instruction_size__int"]) {
            Some(v) => u64::from(v),
            // V8 11.1 to 11.4.59 kept a builtin id and kind-specific flags between them.
            None if older(11, 4, 59) => code_flags + 8,
            None => code_flags + 4,
        };
        let code_positions = match get(&["class_Code__source_position_table__ByteArray"]) {
            Some(v) => u64::from(v),
            // V8 12: position table, code wrapper and instruction stream before the start.
            None if version.0 >= 12 => code_instruction_start - 3 * POINTER,
            // V8 10: two words before the instruction size.
            None => code_instruction_size - 2 * POINTER,
        };
        let code_deopt_data = match get(&["class_Code__deoptimization_data__FixedArray"]) {
            Some(v) => u64::from(v),
            None => code_positions - POINTER,
        };
        let array_length = off(&["class_FixedArrayBase__length__SMI"])?;
        let sfi_script = off(&[
            "class_SharedFunctionInfo__script_or_debug_info__HeapObject",
            "class_SharedFunctionInfo__script__Tagged_HeapObject_",
            "class_SharedFunctionInfo__raw_script__Tagged_Object_",
        ])?;
        let script_name = off(&[
            "class_Script__name__Object",
            "class_Script__name__Tagged_Object_",
        ])?;
        let opt = |names: &[&str], fallback: u64| get(names).map_or(fallback, u64::from);
        let all = |names: &[&str]| -> Vec<u16> {
            names
                .iter()
                .filter_map(|n| s.get(n))
                .map(|v| v as u16)
                .collect()
        };
        let frame_types = s
            .constants
            .iter()
            .filter_map(|(name, &v)| {
                let t = name.strip_prefix("frametype_")?;
                Some((
                    u64::from(v),
                    t.strip_suffix("Frame").unwrap_or(t).to_owned(),
                ))
            })
            .collect();
        Ok(Self {
            version,
            types: Types {
                js_function: (js_function, js_function_last),
                sfi: ty(&["type_SharedFunctionInfo__SHARED_FUNCTION_INFO_TYPE"])?,
                code: ty(&["type_Code__CODE_TYPE"])?,
                script: ty(&["type_Script__SCRIPT_TYPE"])?,
                scope_info: ty(&["type_ScopeInfo__SCOPE_INFO_TYPE"])?,
                bytecode_array: ty(&["type_BytecodeArray__BYTECODE_ARRAY_TYPE"])?,
                // Strings come first among instance types (below 128 in every version).
                first_nonstring: get(&["FirstNonstringType"]).map_or(128, |v| v as u16),
                fixed_arrays: all(&[
                    "type_FixedArray__FIXED_ARRAY_TYPE",
                    "type_TrustedFixedArray__TRUSTED_FIXED_ARRAY_TYPE",
                    "type_ProtectedFixedArray__PROTECTED_FIXED_ARRAY_TYPE",
                ]),
                byte_arrays: all(&[
                    "type_ByteArray__BYTE_ARRAY_TYPE",
                    "type_TrustedByteArray__TRUSTED_BYTE_ARRAY_TYPE",
                ]),
                weak_fixed_arrays: all(&[
                    "type_WeakFixedArray__WEAK_FIXED_ARRAY_TYPE",
                    "type_TrustedWeakFixedArray__TRUSTED_WEAK_FIXED_ARRAY_TYPE",
                ]),
            },
            strings: Strings {
                repr_mask: get(&["StringRepresentationMask"]).map_or(7, |v| v as u16),
                encoding_mask: get(&["StringEncodingMask"]).map_or(8, |v| v as u16),
                one_byte: get(&["OneByteStringTag"]).map_or(8, |v| v as u16),
                seq: get(&["SeqStringTag"]).map_or(0, |v| v as u16),
                cons: get(&["ConsStringTag"]).map_or(1, |v| v as u16),
                sliced: get(&["SlicedStringTag"]).map_or(3, |v| v as u16),
                thin: get(&["ThinStringTag"]).map_or(5, |v| v as u16),
                length: off(&["class_String__length__int32_t"])?,
                chars: off(&["class_SeqOneByteString__chars__char"])?,
                cons_first: opt(&["class_ConsString__first__String"], 16),
                cons_second: opt(&["class_ConsString__second__String"], 24),
                thin_actual: opt(&["class_ThinString__actual__String"], 16),
                sliced_parent: opt(&["class_SlicedString__parent__String"], 16),
                sliced_offset: opt(&["class_SlicedString__offset__SMI"], 24),
            },
            fp_marker: below(&["off_fp_context_or_frame_type", "off_fp_context"])?,
            fp_function: below(&["off_fp_function"])?,
            fp_bytecode_offset: below(&["off_fp_bytecode_offset"])?,
            map_instance_type: off(&["class_Map__instance_type__uint16_t"])?,
            js_function_shared: shared,
            js_function_code,
            sfi_name_or_scope_info: off(&[
                "class_SharedFunctionInfo__name_or_scope_info__Object",
                "class_SharedFunctionInfo__name_or_scope_info__Tagged_Object_",
            ])?,
            // Not in V8 12's metadata; the first field after the map since V8 8.
            sfi_function_data: opt(
                &["class_SharedFunctionInfo__function_data__Object"],
                POINTER,
            ),
            sfi_script,
            script_name,
            script_source: opt(&["class_Script__source__Object"], script_name - POINTER),
            script_line_ends: off(&["class_Script__line_ends__Object"])?,
            array_length,
            array_data: opt(&["class_FixedArray__data__uintptr_t"], 2 * POINTER),
            bytecode_data: off(&["class_BytecodeArray__data__uintptr_t"])?,
            bytecode_positions: [array_length + 3 * POINTER, array_length + 2 * POINTER],
            code_instruction_start,
            code_start_is_pointer,
            code_instruction_size,
            code_flags,
            code_kind_mask: get(&["CodeKindFieldMask"]).unwrap_or(0xf),
            code_kind_shift: get(&["CodeKindFieldShift"]).unwrap_or(0),
            code_kind_baseline: get(&["CodeKindBaseline"]).unwrap_or(11),
            code_positions,
            code_deopt_data,
            deopt_inlined_count: opt(&["DeoptimizationDataInlinedFunctionCountIndex"], 1),
            deopt_literals: opt(&["DeoptimizationDataLiteralArrayIndex"], 2),
            deopt_sfi: opt(&["DeoptimizationDataSharedFunctionInfoIndex"], 6),
            deopt_inlining_positions: opt(&["DeoptimizationDataInliningPositionsIndex"], 7),
            scope_first_vars: opt(&["scopeinfo_idx_first_vars"], 3),
            scope_context_locals: opt(&["scopeinfo_idx_ncontextlocals"], 2),
            frame_types,
        })
        .and_then(Self::check)
    }

    /// Refuses offsets the kernel cannot read within its spans.
    fn check(self) -> Result<Self, String> {
        let span = u64::from(sonde_abi::v8::OBJECT_SPAN);
        let fields = [
            ("JSFunction::shared", self.js_function_shared, 8),
            ("JSFunction::code", self.js_function_code, 8),
            (
                "SharedFunctionInfo::name_or_scope_info",
                self.sfi_name_or_scope_info,
                8,
            ),
            ("SharedFunctionInfo::script", self.sfi_script, 8),
            ("Code::flags", self.code_flags, 4),
            ("Code::instruction_size", self.code_instruction_size, 4),
        ];
        for (name, offset, width) in fields {
            if offset + width > span {
                return Err(format!(
                    "{name} is at {offset}, beyond the {span} bytes the kernel reads"
                ));
            }
        }
        if self.code_start_is_pointer && self.code_instruction_start + 8 > span {
            return Err("Code::instruction_start is beyond what the kernel reads".into());
        }
        Ok(self)
    }

    /// The kernel's settings for a process mapping the builtins at `builtins` (`V8_PROCS`).
    pub(crate) fn kernel_settings(&self, builtins: &[(u64, u64)]) -> sonde_abi::v8::V8Proc {
        use sonde_abi::v8::{MAX_BUILTIN_RANGES, Range, V8Proc};
        let short = |v: u64| u16::try_from(v).expect("checked against OBJECT_SPAN");
        let mut settings = V8Proc {
            builtin_count: builtins.len().min(MAX_BUILTIN_RANGES) as u32,
            code_kind_mask: self.code_kind_mask,
            code_kind_shift: self.code_kind_shift as u8,
            code_kind_baseline: self.code_kind_baseline as u8,
            code_start_is_pointer: u8::from(self.code_start_is_pointer),
            fp_marker: self.fp_marker,
            fp_function: self.fp_function,
            fp_bytecode_offset: self.fp_bytecode_offset,
            map_instance_type: short(self.map_instance_type),
            type_js_function_first: self.types.js_function.0,
            type_js_function_last: self.types.js_function.1,
            type_sfi: self.types.sfi,
            type_code: self.types.code,
            js_function_shared: short(self.js_function_shared),
            js_function_code: short(self.js_function_code),
            sfi_name_or_scope_info: short(self.sfi_name_or_scope_info),
            sfi_script: short(self.sfi_script),
            code_instruction_start: short(self.code_instruction_start),
            code_instruction_size: short(self.code_instruction_size),
            code_flags: short(self.code_flags),
            ..V8Proc::default()
        };
        for (slot, &(start, end)) in settings.builtins.iter_mut().zip(builtins) {
            *slot = Range { start, end };
        }
        settings
    }

    /// The name of frame type `marker` (`Entry`, `Exit`, `Stub`, ...).
    pub(crate) fn frame_type(&self, marker: u64) -> Option<&str> {
        self.frame_types.get(&marker).map(String::as_str)
    }
}
