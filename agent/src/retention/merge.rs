//! Merges pprof profiles of one process identity into one: the hourly tier of the data directory.
//!
//! Tables are rebuilt by value (strings, mappings, functions, locations), so inputs with their own ids
//! merge; samples with the same stack and labels add up, so the merged totals are the sums of the inputs.

use std::collections::HashMap;

use crate::profile::pprof::proto;

/// Why profiles could not be merged.
#[derive(Debug, thiserror::Error)]
pub(crate) enum MergeError {
    #[error("sample types differ ({0} vs {1}): only profiles of one kind merge")]
    SampleTypes(String, String),
    #[error("a table refers to {what} {index}, which does not exist")]
    Dangling { what: &'static str, index: u64 },
}

type MappingKey = (u64, u64, u64, i64, i64);
type FunctionKey = (i64, i64, i64, i64);
type LocationKey = (u64, u64, Vec<(u64, i64)>, bool);
type SampleKey = (Vec<u64>, Vec<(i64, i64, i64, i64)>);

/// Accumulates profiles into one.
#[derive(Default)]
pub(crate) struct Merger {
    out: proto::Profile,
    strings: HashMap<String, i64>,
    mappings: HashMap<MappingKey, u64>,
    functions: HashMap<FunctionKey, u64>,
    locations: HashMap<LocationKey, u64>,
    samples: HashMap<SampleKey, usize>,
    types: Option<String>,
}

/// One input's ids mapped to the output's.
struct Remap<'a> {
    input: &'a proto::Profile,
}

impl Remap<'_> {
    fn string(&self, index: i64) -> Result<&str, MergeError> {
        usize::try_from(index)
            .ok()
            .and_then(|i| self.input.string_table.get(i))
            .map(String::as_str)
            .ok_or(MergeError::Dangling {
                what: "string",
                index: index as u64,
            })
    }
}

impl Merger {
    fn string(&mut self, s: &str) -> i64 {
        if self.out.string_table.is_empty() {
            self.out.string_table.push(String::new());
            self.strings.insert(String::new(), 0);
        }
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.out.string_table.len() as i64;
        self.out.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn copy_string(&mut self, from: &Remap<'_>, index: i64) -> Result<i64, MergeError> {
        Ok(self.string(from.string(index)?))
    }

    /// Adds `input`. Every input must have the sample types of the first.
    pub(crate) fn add(&mut self, input: &proto::Profile) -> Result<(), MergeError> {
        let from = Remap { input };
        let types = input
            .sample_type
            .iter()
            .map(|t| {
                Ok(format!(
                    "{}/{}",
                    from.string(t.r#type)?,
                    from.string(t.unit)?
                ))
            })
            .collect::<Result<Vec<_>, MergeError>>()?
            .join(",");
        match &self.types {
            Some(seen) if *seen != types => {
                return Err(MergeError::SampleTypes(seen.clone(), types));
            }
            Some(_) => {}
            None => self.start(&from, types)?,
        }
        if input.time_nanos != 0
            && (self.out.time_nanos == 0 || input.time_nanos < self.out.time_nanos)
        {
            self.out.time_nanos = input.time_nanos;
        }
        self.out.duration_nanos = self.out.duration_nanos.saturating_add(input.duration_nanos);

        let mut mapping_ids = HashMap::new();
        for m in &input.mapping {
            let key = (
                m.memory_start,
                m.memory_limit,
                m.file_offset,
                self.copy_string(&from, m.filename)?,
                self.copy_string(&from, m.build_id)?,
            );
            let next = self.out.mapping.len() as u64 + 1;
            let id = *self.mappings.entry(key).or_insert(next);
            if id == next {
                self.out.mapping.push(proto::Mapping {
                    id,
                    filename: key.3,
                    build_id: key.4,
                    ..*m
                });
            }
            mapping_ids.insert(m.id, id);
        }
        let mut function_ids = HashMap::new();
        for f in &input.function {
            let key = (
                self.copy_string(&from, f.name)?,
                self.copy_string(&from, f.system_name)?,
                self.copy_string(&from, f.filename)?,
                f.start_line,
            );
            let next = self.out.function.len() as u64 + 1;
            let id = *self.functions.entry(key).or_insert(next);
            if id == next {
                self.out.function.push(proto::Function {
                    id,
                    name: key.0,
                    system_name: key.1,
                    filename: key.2,
                    start_line: key.3,
                });
            }
            function_ids.insert(f.id, id);
        }
        let mut location_ids = HashMap::new();
        for l in &input.location {
            let mapping_id = match l.mapping_id {
                0 => 0,
                old => *mapping_ids.get(&old).ok_or(MergeError::Dangling {
                    what: "mapping",
                    index: old,
                })?,
            };
            let lines = l
                .line
                .iter()
                .map(|line| {
                    let id = function_ids
                        .get(&line.function_id)
                        .ok_or(MergeError::Dangling {
                            what: "function",
                            index: line.function_id,
                        })?;
                    Ok((*id, line.line))
                })
                .collect::<Result<Vec<_>, MergeError>>()?;
            let key = (mapping_id, l.address, lines, l.is_folded);
            let next = self.out.location.len() as u64 + 1;
            let id = *self.locations.entry(key.clone()).or_insert(next);
            if id == next {
                self.out.location.push(proto::Location {
                    id,
                    mapping_id,
                    address: l.address,
                    line: key
                        .2
                        .iter()
                        .map(|&(function_id, line)| proto::Line { function_id, line })
                        .collect(),
                    is_folded: l.is_folded,
                });
            }
            location_ids.insert(l.id, id);
        }
        for s in &input.sample {
            let stack = s
                .location_id
                .iter()
                .map(|old| {
                    location_ids.get(old).copied().ok_or(MergeError::Dangling {
                        what: "location",
                        index: *old,
                    })
                })
                .collect::<Result<Vec<_>, MergeError>>()?;
            let labels = s
                .label
                .iter()
                .map(|l| {
                    Ok((
                        self.copy_string(&from, l.key)?,
                        self.copy_string(&from, l.str)?,
                        l.num,
                        self.copy_string(&from, l.num_unit)?,
                    ))
                })
                .collect::<Result<Vec<_>, MergeError>>()?;
            let key = (stack, labels);
            match self.samples.get(&key) {
                Some(&i) => {
                    let values = &mut self.out.sample[i].value;
                    for (sum, v) in values.iter_mut().zip(&s.value) {
                        // Saturating: a merged total that no longer fits stays at the maximum.
                        *sum = sum.saturating_add(*v);
                    }
                }
                None => {
                    self.samples.insert(key.clone(), self.out.sample.len());
                    self.out.sample.push(proto::Sample {
                        location_id: key.0,
                        value: s.value.clone(),
                        label: key
                            .1
                            .iter()
                            .map(|&(key, str, num, num_unit)| proto::Label {
                                key,
                                str,
                                num,
                                num_unit,
                            })
                            .collect(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Takes the first input's sample types, period and comments (the workload's tags, equal in all).
    fn start(&mut self, from: &Remap<'_>, types: String) -> Result<(), MergeError> {
        self.types = Some(types);
        let input = from.input;
        for t in &input.sample_type {
            let value_type = proto::ValueType {
                r#type: self.copy_string(from, t.r#type)?,
                unit: self.copy_string(from, t.unit)?,
            };
            self.out.sample_type.push(value_type);
        }
        if let Some(p) = &input.period_type {
            let period_type = proto::ValueType {
                r#type: self.copy_string(from, p.r#type)?,
                unit: self.copy_string(from, p.unit)?,
            };
            self.out.period_type = Some(period_type);
        }
        self.out.period = input.period;
        self.out.default_sample_type = self.copy_string(from, input.default_sample_type)?;
        for &c in &input.comment {
            let c = self.copy_string(from, c)?;
            self.out.comment.push(c);
        }
        Ok(())
    }

    /// The merged profile.
    pub(crate) fn finish(self) -> proto::Profile {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile(stacks: &[(&[&str], i64)], time: i64) -> proto::Profile {
        let mut p = proto::Profile {
            string_table: vec!["".into(), "samples".into(), "count".into()],
            sample_type: vec![proto::ValueType { r#type: 1, unit: 2 }],
            time_nanos: time,
            duration_nanos: 10,
            ..Default::default()
        };
        for (stack, value) in stacks {
            let mut ids = Vec::new();
            for name in *stack {
                // Ids in reverse order of the merged output's, so remapping is exercised.
                let s = p.string_table.len() as i64;
                p.string_table.push((*name).to_owned());
                let id = 100 - p.function.len() as u64;
                p.function.push(proto::Function {
                    id,
                    name: s,
                    ..Default::default()
                });
                p.location.push(proto::Location {
                    id,
                    line: vec![proto::Line {
                        function_id: id,
                        line: 0,
                    }],
                    ..Default::default()
                });
                ids.push(id);
            }
            p.sample.push(proto::Sample {
                location_id: ids,
                value: vec![*value],
                label: vec![],
            });
        }
        p
    }

    fn totals(p: &proto::Profile) -> HashMap<String, i64> {
        let name = |loc: u64| {
            let l = p.location.iter().find(|l| l.id == loc).unwrap();
            let f = p
                .function
                .iter()
                .find(|f| f.id == l.line[0].function_id)
                .unwrap();
            p.string_table[f.name as usize].clone()
        };
        let mut out = HashMap::new();
        for s in &p.sample {
            let stack: Vec<String> = s.location_id.iter().map(|&l| name(l)).collect();
            *out.entry(stack.join(";")).or_default() += s.value[0];
        }
        out
    }

    #[test]
    fn merged_totals_are_the_sums_of_the_inputs() {
        let a = profile(&[(&["main", "work"], 5), (&["main", "idle"], 1)], 200);
        let b = profile(&[(&["main", "work"], 7), (&["main", "other"], 2)], 100);
        let mut m = Merger::default();
        m.add(&a).unwrap();
        m.add(&b).unwrap();
        let out = m.finish();
        let t = totals(&out);
        assert_eq!(t["main;work"], 12);
        assert_eq!(t["main;idle"], 1);
        assert_eq!(t["main;other"], 2);
        assert_eq!(out.sample.len(), 3, "equal stacks share one sample");
        assert_eq!(out.function.len(), 4, "functions deduplicated by name");
        assert_eq!((out.time_nanos, out.duration_nanos), (100, 20));
    }

    #[test]
    fn other_sample_types_and_dangling_ids_are_errors() {
        let a = profile(&[(&["main"], 1)], 1);
        let mut b = a.clone();
        b.string_table[2] = "nanoseconds".into();
        let mut m = Merger::default();
        m.add(&a).unwrap();
        assert!(matches!(m.add(&b), Err(MergeError::SampleTypes(..))));
        let mut c = a.clone();
        c.sample[0].location_id = vec![7];
        assert!(matches!(
            Merger::default().add(&c),
            Err(MergeError::Dangling {
                what: "location",
                ..
            })
        ));
    }
}
