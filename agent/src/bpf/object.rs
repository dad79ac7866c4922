//! The embedded eBPF object and what every loader of its programs shares: finding a program by
//! name and kind, and saying what the verifier made of it.

use aya::Ebpf;

use super::BpfError;

use crate::platform::kernel::Programs;

/// The eBPF object built by `build.rs` (aya-build) for this exact source tree.
pub(super) static OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/sonde-ebpf"));

/// The same programs built for Linux 5.10 to 6.0 (sonde-ebpf's feature `legacy`), where the
/// architecture has them (`build.rs`); empty elsewhere, where `platform::kernel` never picks them.
#[cfg(legacy_object)]
static LEGACY_OBJECT: &[u8] =
    aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/legacy/sonde-ebpf"));
#[cfg(not(legacy_object))]
static LEGACY_OBJECT: &[u8] = &[];

/// The object of `programs`.
pub(super) fn object(programs: Programs) -> &'static [u8] {
    match programs {
        Programs::Full => OBJECT,
        Programs::Legacy => LEGACY_OBJECT,
    }
}

pub(super) fn program_err(
    program: &'static str,
) -> impl Fn(aya::programs::ProgramError) -> BpfError {
    move |source| BpfError::Program { program, source }
}

/// Program `name` of `ebpf` as its kind `T` (a tracepoint, a perf event program...).
pub(super) fn typed_program<'a, T>(
    ebpf: &'a mut Ebpf,
    name: &'static str,
) -> Result<&'a mut T, BpfError>
where
    &'a mut T: TryFrom<&'a mut aya::programs::Program, Error = aya::programs::ProgramError>,
{
    ebpf.program_mut(name)
        .ok_or(aya::programs::ProgramError::UnexpectedProgramType)
        .and_then(TryInto::try_into)
        .map_err(program_err(name))
}

/// What the verifier made of a program: the start-up cost an operator pays once per program.
pub(super) fn log_verified(
    program: &str,
    info: Option<aya::programs::ProgramInfo>,
    began: std::time::Instant,
) {
    tracing::debug!(
        program,
        verified_instructions = info.and_then(|i| i.verified_instruction_count()),
        seconds = began.elapsed().as_secs_f64(),
        "program verified and loaded"
    );
}

#[cfg(test)]
mod tests {
    /// `build.rs` builds the legacy object exactly for the architectures that say they have legacy
    /// programs.
    #[test]
    fn the_legacy_object_is_built_where_the_architecture_has_legacy_programs() {
        assert_eq!(
            !super::LEGACY_OBJECT.is_empty(),
            crate::platform::arch::LEGACY_PROGRAMS
        );
    }
}
