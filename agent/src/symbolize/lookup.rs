//! Address lookups: user addresses of one binary through blazesym (from its own file or a separate
//! debug file) and the conversion of its answer to an inline chain; kernel addresses by the kernel's
//! own lookup through BPF, or from kallsyms.

use std::{path::PathBuf, sync::Arc};

use blazesym::symbolize::{
    Input, Symbolizer as Blaze,
    source::{Elf, Source},
};

use super::{
    debuginfo::{Resolved, reads_dwarf},
    kallsyms::{self, Kallsyms},
};
use crate::{bpf::kernel_names::NameKernel, process::Binary, profile::Symbol};

/// Inline chain, innermost first; empty when the address has no symbol.
pub(crate) type Chain = Arc<[Symbol]>;

pub(crate) struct Lookup {
    blaze: Blaze,
    /// The kernel's own lookup, when its program loaded; kallsyms otherwise, or once it fails.
    pub(super) kernel_names: Option<Box<dyn NameKernel>>,
    /// Built at the second batch of kernel frames (the first is named in one pass, see `kernel`).
    kallsyms: Option<Kallsyms>,
    /// Whether a batch of kernel frames was named already (by the one pass).
    kernel_named: bool,
    /// blazesym calls that failed outright (their frames stay unsymbolized).
    pub errors: u64,
}

impl Lookup {
    pub(super) fn new() -> Self {
        // blazesym's own debug directories stay on: they resolve dwz supplementary files and the
        // debug links of binaries that have a `.symtab` (adding file and line). Stripped binaries get
        // their debug file from `debuginfo` first, inside the process's root.
        let blaze = Blaze::builder()
            .enable_code_info(true)
            .enable_inlined_fns(true)
            .enable_demangling(true)
            .build();
        Self {
            blaze,
            kernel_names: None,
            kallsyms: None,
            kernel_named: false,
            errors: 0,
        }
    }

    /// Symbolizes file `offsets` of `binary`, from `source`: a debug file by ELF address, then
    /// the binary itself for what the debug file lacks (MiniDebugInfo leaves exported functions to
    /// `.dynsym`); or the binary alone.
    pub(super) fn user(
        &mut self,
        binary: &Binary,
        source: Option<&Resolved>,
        offsets: &[u64],
    ) -> Vec<Chain> {
        let mut chains = match source {
            Some(Resolved::Debug(debug)) => {
                let vaddrs: Vec<u64> = offsets.iter().map(|o| binary.elf.vaddr_of(*o)).collect();
                self.elf(
                    debug.open_path(),
                    reads_dwarf(debug.inflated_dwarf),
                    Input::VirtOffset(&vaddrs),
                )
            }
            _ => None,
        }
        .unwrap_or_else(|| vec![empty(); offsets.len()]);
        let unresolved: Vec<usize> = (0..offsets.len())
            .filter(|&i| chains[i].is_empty())
            .collect();
        if !unresolved.is_empty() {
            let rest: Vec<u64> = unresolved.iter().map(|&i| offsets[i]).collect();
            let dwarf = reads_dwarf(binary.elf.inflated_dwarf);
            if let Some(found) = self.elf(binary.open_path(), dwarf, Input::FileOffset(&rest)) {
                for (i, chain) in unresolved.into_iter().zip(found) {
                    chains[i] = chain;
                }
            }
        }
        chains
    }

    /// `dwarf`: whether blazesym may read the file's DWARF (else its symbol tables only).
    fn elf(&mut self, path: PathBuf, dwarf: bool, input: Input<&[u64]>) -> Option<Vec<Chain>> {
        let mut elf = Elf::new(&path);
        elf.debug_syms = dwarf;
        let src = Source::Elf(elf);
        match self.blaze.symbolize(&src, input) {
            Ok(results) => Some(results.iter().map(convert).collect()),
            Err(err) => {
                tracing::debug!(path = %path.display(), %err, "symbolization failed");
                self.errors += 1;
                None
            }
        }
    }

    /// Kernel addresses by the kernel's own lookup; or through kallsyms, where the first batch is
    /// named in one pass that keeps nothing (a recording has one) and an agent that asks again
    /// builds the table and keeps it.
    pub(super) fn kernel(&mut self, addrs: &[u64]) -> Vec<Chain> {
        if let Some(namer) = &mut self.kernel_names {
            match namer.names(addrs) {
                Ok(names) => return names.into_iter().map(kernel_chain).collect(),
                Err(err) => {
                    tracing::warn!(%err, "naming kernel frames through BPF failed: reading /proc/kallsyms instead");
                    self.kernel_names = None;
                }
            }
        }
        if !std::mem::replace(&mut self.kernel_named, true) {
            match kallsyms::names_once(addrs) {
                Ok(names) if names.iter().any(Option::is_some) => {
                    return names.into_iter().map(kernel_chain).collect();
                }
                // Hidden or unreadable: the table's load below says why.
                _ => {}
            }
        }
        let kallsyms = self.kallsyms.get_or_insert_with(|| {
            let read = Kallsyms::load();
            match &read {
                Err(err) => tracing::warn!(%err, "kernel frames stay unnamed: reading /proc/kallsyms failed"),
                Ok(k) if k.is_empty() => tracing::warn!(
                    "kernel frames stay unnamed: /proc/kallsyms shows no addresses (run sonde as root, \
                     or lower kernel.kptr_restrict)"
                ),
                Ok(_) => {}
            }
            read.unwrap_or_default()
        });
        if kallsyms.is_empty() {
            self.errors += 1;
            return vec![empty(); addrs.len()];
        }
        addrs
            .iter()
            .map(|a| kernel_chain(kallsyms.name(*a).map(str::to_owned)))
            .collect()
    }

    /// Drops blazesym's parsed copy of `path`.
    pub(super) fn evict(&mut self, path: PathBuf) {
        let evict =
            blazesym::symbolize::evict::Evict::Elf(blazesym::symbolize::evict::Elf::new(path));
        if let Err(err) = self.blaze.evict(&evict) {
            tracing::debug!(%err, "evicting a symbolizer cache entry failed");
        }
    }
}

/// A kernel address's chain: its function alone (kallsyms has no lines or inlining), or none.
fn kernel_chain(name: Option<String>) -> Chain {
    match name {
        Some(name) => Arc::from(vec![Symbol {
            name,
            file: None,
            line: None,
        }]),
        None => empty(),
    }
}

pub(crate) fn empty() -> Chain {
    Arc::from(Vec::new())
}

/// blazesym result -> inline chain, innermost first, containing function last.
fn convert(r: &blazesym::symbolize::Symbolized<'_>) -> Chain {
    let blazesym::symbolize::Symbolized::Sym(sym) = r else {
        return empty();
    };
    // Past the end of the nearest symbol (e.g. a PLT stub after `_init`): not really in it.
    if sym.size.is_some_and(|size| sym.offset >= size) {
        return empty();
    }
    let file_line = |ci: Option<&blazesym::symbolize::CodeInfo<'_>>| {
        (
            ci.map(|c| c.to_path().display().to_string()),
            ci.and_then(|c| c.line),
        )
    };
    // blazesym lists the containing function, then inlined functions outer to inner, each with its own
    // position (the innermost holds the address's position); pprof wants innermost first.
    let outer = std::iter::once((sym.name.as_ref(), file_line(sym.code_info.as_deref())));
    let inlined = sym
        .inlined
        .iter()
        .map(|f| (f.name.as_ref(), file_line(f.code_info.as_ref())));
    let mut chain: Vec<Symbol> = outer
        .chain(inlined)
        .map(|(name, (file, line))| Symbol {
            name: name.to_owned(),
            file,
            line,
        })
        .collect();
    chain.reverse();
    Arc::from(chain)
}
