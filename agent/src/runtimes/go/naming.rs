//! Go code in symbolized stacks: native frames, named from the binary's own `.gopclntab` (inlined
//! calls included) rather than ELF symbols, which a stripped Go binary lacks.

use std::{collections::HashSet, sync::Arc};

use super::GoNames;
use crate::{
    process::Binary,
    profile::Symbol,
    runtimes::{Runtime, TableStats, seam::RuntimeNames},
};

/// Names Go binaries' code from their tables.
#[derive(Default)]
pub(crate) struct GoNaming {
    names: GoNames,
}

impl RuntimeNames for GoNaming {
    fn runtime(&self) -> Runtime {
        Runtime::Go
    }

    fn native_chains(&mut self, binary: &Binary, offsets: &[u64]) -> Option<Vec<Arc<[Symbol]>>> {
        let table = self.names.table(binary)?;
        Some(GoNames::chains(&table, binary, offsets))
    }

    fn roots(&self) -> &'static [&'static str] {
        &super::ROOT_FUNCTIONS
    }

    fn retain(&mut self, binaries: &HashSet<(u64, u64)>, _pids: &HashSet<u32>) {
        self.names.retain(binaries);
    }

    fn tables(&self) -> TableStats {
        self.names.stats()
    }
}
