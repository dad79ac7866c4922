//! Finding Node.js in a captured process: a mapped `node` or `libnode.so` exporting V8's `v8dbg_*`
//! constants (read from the ELF file by `super::elf`: no process read), the layout of the
//! structures sonde reads (`layout`), and the kernel's settings for the process (`V8_PROCS`): those
//! offsets, and where the embedded builtins are mapped, in the binary's text and in the copies V8
//! maps into its code ranges (`--short-builtin-calls`), found among the process's mappings.

use std::sync::Arc;

use sonde_abi::v8::{MAX_BUILTIN_RANGES, V8Proc};

use super::elf::V8Symbols;
use super::layout::Layout;
use crate::process::{Mapping, binary::Binary};

/// Why a V8 was found but cannot be walked.
#[derive(Debug, thiserror::Error)]
#[error(
    "{binary} embeds V8 {version}, which sonde does not walk: {why}; its JavaScript frames stay [jit] (native frames are still shown)"
)]
pub(crate) struct V8Error {
    /// The `node` binary.
    pub(crate) binary: String,
    /// V8's version, as far as it is known.
    pub(crate) version: String,
    /// Why, for the user.
    pub(crate) why: String,
}

/// A Node.js (V8) runtime found in a process.
#[derive(Debug)]
pub(crate) struct Node {
    /// Path of the binary holding V8.
    pub(crate) binary: String,
    /// Where its structures' fields are.
    pub(crate) layout: Arc<Layout>,
    /// The binary, (device, inode), and its load bias: a later capture of the process with the same
    /// runs the same V8 (its names stay valid), whatever else it mapped since.
    image: ((u64, u64), u64),
}

impl Node {
    /// Whether `mappings` (a later capture of the process) run the V8 this was read from.
    pub(crate) fn same_image(&self, mappings: &[Mapping]) -> bool {
        v8_binary(mappings).is_some_and(|(b, _, bias)| (b.id, bias) == self.image)
    }

    /// What the kernel needs to walk this process's JavaScript frames, given its `mappings`.
    pub(crate) fn kernel_settings(&self, mappings: &[Mapping]) -> V8Proc {
        let blob = v8_binary(mappings).and_then(|(b, symbols, _)| Some((b.id, symbols.builtins?)));
        let ranges: Vec<(u64, u64)> = match blob {
            Some((id, blob)) => builtin_ranges(mappings, id, blob),
            None => Vec::new(),
        };
        self.layout.kernel_settings(&ranges)
    }

    /// V8's version, for messages.
    pub(crate) fn version(&self) -> String {
        let (major, minor, build) = self.layout.version;
        format!("{major}.{minor}.{build}")
    }
}

/// The V8 of a process with `mappings`: Ok(None) when it has none. `layouts` reads (or recalls) the
/// layout of a binary's constants.
pub(crate) fn detect(
    mappings: &[Mapping],
    layouts: impl FnOnce(&Arc<Binary>, &V8Symbols) -> Result<Arc<Layout>, String>,
) -> Result<Option<Node>, V8Error> {
    let Some((binary, symbols, bias)) = v8_binary(mappings) else {
        return Ok(None);
    };
    let version = match symbols.version {
        Some((major, minor, build)) => format!("{major}.{minor}.{build}"),
        None => "(unknown version)".to_owned(),
    };
    let refuse = |why: String| V8Error {
        binary: binary.path.clone(),
        version: version.clone(),
        why,
    };
    if symbols.builtins.is_none() {
        return Err(refuse(
            "its embedded builtins (v8_Default_embedded_blob_code_) are not in its symbols".into(),
        ));
    }
    let layout = layouts(binary, symbols).map_err(refuse)?;
    Ok(Some(Node {
        binary: binary.path.clone(),
        layout,
        image: (binary.id, bias),
    }))
}

/// The first mapped binary with V8's constants, its symbols and its load bias.
fn v8_binary(mappings: &[Mapping]) -> Option<(&Arc<Binary>, &V8Symbols, u64)> {
    mappings.iter().find_map(|m| {
        let binary = m.binary.as_ref()?;
        let symbols = binary.fact::<V8Symbols>(super::NAME)?;
        let bias = crate::process::load_bias::load_bias(
            m.module.start,
            m.module.file_offset,
            &binary.elf.segments,
        );
        Some((binary, symbols, bias))
    })
}

/// Where the builtins `blob` (ELF addresses of the binary `id`) are mapped: every mapping of the
/// binary that holds part of them, at most [`MAX_BUILTIN_RANGES`].
fn builtin_ranges(mappings: &[Mapping], id: (u64, u64), blob: (u64, u64)) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = mappings
        .iter()
        .filter_map(|m| {
            let binary = m.binary.as_ref().filter(|b| b.id == id)?;
            let bias = crate::process::load_bias::load_bias(
                m.module.start,
                m.module.file_offset,
                &binary.elf.segments,
            );
            let start = blob.0.max(m.module.start.wrapping_sub(bias));
            let end = blob.1.min(m.module.limit.wrapping_sub(bias));
            (start < end).then(|| (start.wrapping_add(bias), end.wrapping_add(bias)))
        })
        .collect();
    if ranges.len() > MAX_BUILTIN_RANGES {
        tracing::debug!(
            count = ranges.len(),
            "more builtin copies than the kernel keeps; the rest are walked as code without a table"
        );
        ranges.truncate(MAX_BUILTIN_RANGES);
    }
    ranges
}
