//! Which value of a pprof sample the diff reads, and whether a sample's values can be trusted: one per
//! sample type (a short array silently read as 0 would shift shares), none negative where used (a
//! negative cost would let one function pass 100% of a total it reduces).

use std::path::{Path, PathBuf};

use super::error::DiffError;

/// The chosen sample type, fixed by the first file read.
pub(super) struct Chosen {
    pub(super) name: String,
    pub(super) unit: String,
    pub(super) first: PathBuf,
}

/// Finds the index of the sample type to diff, and checks it agrees with the files read before.
pub(super) fn pick_sample_type(
    path: &Path,
    types: &[(&str, &str)],
    wanted: Option<&str>,
    chosen: &mut Option<Chosen>,
) -> Result<usize, DiffError> {
    let describe = |(t, u): (&str, &str)| format!("{t}/{u}");
    let available = || {
        types
            .iter()
            .map(|&t| describe(t))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let name = match (wanted, chosen.as_ref()) {
        (Some(w), _) => w.to_owned(),
        (None, Some(c)) => c.name.clone(),
        (None, None) => match types.iter().find(|(t, _)| *t == "cpu") {
            Some((t, _)) => (*t).to_owned(),
            None => types[0].0.to_owned(),
        },
    };
    let Some(index) = types.iter().position(|(t, _)| *t == name) else {
        return Err(match (wanted, chosen.as_ref()) {
            (None, Some(c)) => DiffError::SampleTypeMismatch {
                first: c.first.clone(),
                first_type: format!("{}/{}", c.name, c.unit),
                other: path.to_owned(),
                other_type: available(),
            },
            _ => DiffError::MissingSampleType {
                path: path.to_owned(),
                wanted: name,
                available: available(),
            },
        });
    };
    let unit = types[index].1;
    match chosen {
        Some(c) if c.unit != unit => Err(DiffError::SampleTypeMismatch {
            first: c.first.clone(),
            first_type: format!("{}/{}", c.name, c.unit),
            other: path.to_owned(),
            other_type: describe(types[index]),
        }),
        Some(_) => Ok(index),
        None => {
            *chosen = Some(Chosen {
                name,
                unit: unit.to_owned(),
                first: path.to_owned(),
            });
            Ok(index)
        }
    }
}

/// The chosen value of a sample and its sample count (when the profile has a count type); an error
/// saying what is wrong unless it has one value per sample type, none of them negative where used.
pub(super) fn sample_weight(
    values: &[i64],
    types: &[(&str, &str)],
    value_index: usize,
    count_index: Option<usize>,
) -> Result<(i64, Option<i64>), String> {
    if values.len() != types.len() {
        return Err(format!(
            "has {} value(s) for {} sample types",
            values.len(),
            types.len()
        ));
    }
    let value = values[value_index];
    let count = count_index.map(|i| values[i]);
    // Negative costs would let one function's share pass 100% of a total they reduce.
    for (i, v) in std::iter::once((value_index, value)).chain(count_index.zip(count)) {
        if v < 0 {
            let (t, u) = types[i];
            return Err(format!("has a negative value {v} for {t}/{u}"));
        }
    }
    Ok((value, count))
}

#[cfg(test)]
mod tests {
    use super::*;

    const TYPES: &[(&str, &str)] = &[("samples", "count"), ("cpu", "nanoseconds")];

    #[test]
    fn a_sample_needs_one_value_per_type() {
        assert_eq!(
            sample_weight(&[2, 20], TYPES, 1, Some(0)),
            Ok((20, Some(2)))
        );
        assert_eq!(
            sample_weight(&[2], TYPES, 1, Some(0)),
            Err("has 1 value(s) for 2 sample types".into())
        );
        assert!(sample_weight(&[2, 20, 7], TYPES, 1, Some(0)).is_err());
    }

    #[test]
    fn negative_values_are_refused_where_used() {
        assert_eq!(
            sample_weight(&[2, -20], TYPES, 1, Some(0)),
            Err("has a negative value -20 for cpu/nanoseconds".into())
        );
        assert!(sample_weight(&[-2, 20], TYPES, 1, Some(0)).is_err());
        // A value the diff does not read may be anything.
        assert_eq!(sample_weight(&[-2, 20], TYPES, 1, None), Ok((20, None)));
    }
}
