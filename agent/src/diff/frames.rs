//! Names the frames of one pprof file: interns function names (shared by every file of a diff) and maps
//! each location id to its inline chain of function ids, leaf first. Unsymbolized locations are named
//! `<mapping basename>+0x<file offset>`.

use std::{collections::HashMap, path::Path};

use super::{error::DiffError, wire::location_ids};
use crate::profile::pprof::proto;

/// An interned function name.
pub type FnId = u32;

/// Function names, each stored once; ids are dense from 0.
#[derive(Debug, Default)]
pub struct Interner {
    ids: HashMap<String, FnId>,
    names: Vec<String>,
}

impl Interner {
    /// The id of `name`, adding it on first sight.
    pub fn intern(&mut self, name: &str) -> FnId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = self.names.len() as FnId;
        self.names.push(name.to_owned());
        self.ids.insert(name.to_owned(), id);
        id
    }

    /// The name of `id`.
    pub fn name(&self, id: FnId) -> &str {
        &self.names[id as usize]
    }

    /// How many names are interned.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when nothing is interned.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

/// `perftools.profiles.ValueType`, declared here so this module does not depend on the generated field
/// name of `type` (`ty` or `r#type`, depending on the prost configuration).
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct ValueType {
    #[prost(int64, tag = "1")]
    pub(super) name: i64,
    #[prost(int64, tag = "2")]
    pub(super) unit: i64,
}

/// The parts of a pprof that samples refer to; the samples themselves are skipped here and streamed later.
#[derive(Clone, PartialEq, prost::Message)]
pub(super) struct Header {
    #[prost(message, repeated, tag = "1")]
    pub(super) sample_type: Vec<ValueType>,
    #[prost(message, repeated, tag = "3")]
    pub(super) mapping: Vec<proto::Mapping>,
    #[prost(message, repeated, tag = "4")]
    pub(super) location: Vec<proto::Location>,
    #[prost(message, repeated, tag = "5")]
    pub(super) function: Vec<proto::Function>,
    #[prost(string, repeated, tag = "6")]
    pub(super) string_table: Vec<String>,
    #[prost(int64, tag = "10")]
    pub(super) duration_nanos: i64,
    #[prost(int64, tag = "12")]
    pub(super) period: i64,
}

/// Where one location's functions sit in [`Tables::ids`].
#[derive(Clone, Copy, Debug)]
struct Chain {
    start: u32,
    len: u32,
    unsymbolized: bool,
}

/// Per-file lookup from pprof location id to the interned functions of that location, leaf first.
pub(super) struct Tables {
    ids: Vec<FnId>,
    /// Indexed by location id when the ids are dense (the usual case), else empty.
    dense: Vec<Option<Chain>>,
    sparse: HashMap<u64, Chain>,
    no_frames: FnId,
}

impl Tables {
    pub(super) fn build<'s>(
        path: &Path,
        header: &'s Header,
        names: &mut Interner,
        inlined: &mut Vec<bool>,
        string: &impl Fn(i64) -> Result<&'s str, DiffError>,
    ) -> Result<Self, DiffError> {
        let mut functions = HashMap::with_capacity(header.function.len());
        for f in &header.function {
            let name = string(f.name)?;
            let name = if name.is_empty() {
                string(f.system_name)?
            } else {
                name
            };
            functions.insert(
                f.id,
                names.intern(if name.is_empty() { "[unknown]" } else { name }),
            );
        }
        let mappings: HashMap<u64, &proto::Mapping> =
            header.mapping.iter().map(|m| (m.id, m)).collect();
        let max_id = header.location.iter().map(|l| l.id).max().unwrap_or(0);
        let dense_ok = max_id <= 4 * header.location.len() as u64 + 1024;
        let mut tables = Tables {
            ids: Vec::with_capacity(header.location.len() * 2),
            dense: if dense_ok {
                vec![None; max_id as usize + 1]
            } else {
                Vec::new()
            },
            sparse: HashMap::new(),
            no_frames: names.intern("[no frames]"),
        };
        for location in &header.location {
            let start = tables.ids.len() as u32;
            let unsymbolized = location.line.is_empty();
            if unsymbolized {
                tables
                    .ids
                    .push(names.intern(&unsymbolized_name(location, &mappings, string)?));
            } else {
                // lines[0] is the innermost inlined function, the last line the containing function.
                let outermost = location.line.len() - 1;
                for (i, line) in location.line.iter().enumerate() {
                    let id = functions.get(&line.function_id).copied().ok_or_else(|| {
                        DiffError::NotPprof {
                            path: path.to_owned(),
                            reason: format!(
                                "location {} refers to undefined function {}",
                                location.id, line.function_id
                            ),
                        }
                    })?;
                    if i < outermost {
                        if inlined.len() <= id as usize {
                            inlined.resize(id as usize + 1, false);
                        }
                        inlined[id as usize] = true;
                    }
                    tables.ids.push(id);
                }
            }
            let chain = Chain {
                start,
                len: tables.ids.len() as u32 - start,
                unsymbolized,
            };
            if dense_ok {
                tables.dense[location.id as usize] = Some(chain);
            } else {
                tables.sparse.insert(location.id, chain);
            }
        }
        Ok(tables)
    }

    /// Fills `stack` with the functions of the packed location ids, leaf first; returns whether the root
    /// frame is unsymbolized (a sign of a truncated walk). Fails past `max_frames`: a few bytes of location
    /// ids, each naming a location with many inlined functions, would otherwise expand without bound.
    pub(super) fn expand(
        &self,
        packed: &[u8],
        stack: &mut Vec<FnId>,
        max_frames: usize,
    ) -> Result<bool, String> {
        stack.clear();
        let mut root_unsymbolized = false;
        for id in location_ids(packed) {
            let id = id?;
            let chain = self.chain(id).ok_or_else(|| {
                format!("a sample refers to location {id}, which the profile does not define")
            })?;
            if stack.len() + chain.len as usize > max_frames {
                return Err(format!(
                    "a sample's stack expands to more than {max_frames} frames, more than --max-input-mib \
                     leaves room for"
                ));
            }
            stack.extend_from_slice(
                &self.ids[chain.start as usize..(chain.start + chain.len) as usize],
            );
            root_unsymbolized = chain.unsymbolized;
        }
        if stack.is_empty() {
            stack.push(self.no_frames);
        }
        Ok(root_unsymbolized)
    }

    fn chain(&self, id: u64) -> Option<Chain> {
        if self.dense.is_empty() {
            self.sparse.get(&id).copied()
        } else {
            self.dense.get(id as usize).copied().flatten()
        }
    }
}

/// `<mapping basename>+0x<offset in the file>`, or `[unknown]+0x<address>` without a mapping.
fn unsymbolized_name<'s>(
    location: &proto::Location,
    mappings: &HashMap<u64, &proto::Mapping>,
    string: &impl Fn(i64) -> Result<&'s str, DiffError>,
) -> Result<String, DiffError> {
    Ok(match mappings.get(&location.mapping_id) {
        Some(m) => {
            let file = string(m.filename)?;
            let base = file
                .rsplit('/')
                .next()
                .filter(|b| !b.is_empty())
                .unwrap_or("[unknown]");
            let offset = location
                .address
                .wrapping_sub(m.memory_start)
                .wrapping_add(m.file_offset);
            format!("{base}+{offset:#x}")
        }
        None => format!("[unknown]+{:#x}", location.address),
    })
}
