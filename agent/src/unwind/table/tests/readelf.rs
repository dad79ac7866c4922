//! A parser for `readelf --debug-dump=frames-interp` (GNU binutils): the reference the built tables
//! are checked against. Only the columns the builder reads are kept (CFA, rbp, ra).
//!
//! The output, per section, is a list of entries separated by blank lines:
//! ```text
//! 00000030 0000000000000014 00000000 CIE "zR" cf=1 df=-8 ra=16
//!    LOC           CFA      ra
//! 0000000000000000 rsp+8    c-8
//!
//! 00000048 0000000000000024 0000001c FDE cie=00000030 pc=0000000000001020..00000000000010b0
//!    LOC           CFA      rbx   rbp   ra
//! 0000000000001020 rsp+16   u     c-16  c-8
//! ```
//! An FDE without instructions prints no table: its CIE's initial rules apply. The register
//! columns vary per entry.

use std::collections::HashMap;
use std::path::Path;

use super::fixture::run;

/// The CFI of one section as readelf interprets it.
#[derive(Debug, Default)]
pub(super) struct Frames {
    /// CIEs by section offset.
    pub(super) cies: HashMap<u64, Cie>,
    /// FDEs in section order.
    pub(super) fdes: Vec<Fde>,
}

#[derive(Debug)]
pub(super) struct Cie {
    /// The augmentation string without quotes (`zR`, `zRS`, empty in `.debug_frame`).
    pub(super) augmentation: String,
    /// Its initial rules (LOC 0).
    pub(super) rows: Vec<Row>,
}

#[derive(Debug)]
pub(super) struct Fde {
    /// Section offset, to name it in messages.
    pub(super) offset: u64,
    /// Offset of its CIE.
    pub(super) cie: u64,
    pub(super) start: u64,
    pub(super) end: u64,
    /// Empty when readelf printed no table (the CIE's rules apply).
    pub(super) rows: Vec<Row>,
}

/// One printed row.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub(super) loc: u64,
    /// e.g. `rsp+8`, `rbp+16`, `exp`.
    pub(super) cfa: String,
    /// e.g. `c-16`, `u`; `None` when the entry has no rbp column.
    pub(super) rbp: Option<String>,
    /// e.g. `c-8`, `u`; `None` when the entry has no ra column.
    pub(super) ra: Option<String>,
}

enum Header {
    Cie { offset: u64, augmentation: String },
    Fde(Fde),
}

/// Runs readelf on `binary` and parses the dump of `section` (`.eh_frame` or `.debug_frame`).
pub(super) fn frames(binary: &Path, section: &str) -> Frames {
    let path = binary.to_str().expect("UTF-8 path");
    // Not following `.gnu_debuglink`: with a debug package installed, readelf would also dump the
    // separate debug file, whose NOBITS `.eh_frame` makes it exit 1.
    let args = [
        "--debug-dump=no-follow-links",
        "--debug-dump=frames-interp",
        "--wide",
        path,
    ];
    let output = run("readelf", &args);
    let frames = parse(&output, section);
    assert!(
        !frames.fdes.is_empty(),
        "readelf shows no FDE in {section} of {path}; its output starts with:\n{}",
        output.chars().take(2000).collect::<String>()
    );
    frames
}

/// Parses the entries of `section` in readelf's output.
pub(super) fn parse(output: &str, section: &str) -> Frames {
    let mut frames = Frames::default();
    let mut in_section = false;
    let mut header: Option<Header> = None;
    let mut columns: Vec<String> = Vec::new();
    let mut rows: Vec<Row> = Vec::new();
    for line in output.lines() {
        if let Some(rest) = line.strip_prefix("Contents of the ") {
            finish(&mut frames, header.take(), std::mem::take(&mut rows));
            in_section = rest.starts_with(&format!("{section} section"));
            continue;
        }
        if !in_section {
            continue;
        }
        let fields = fields(line);
        if fields.is_empty() {
            finish(&mut frames, header.take(), std::mem::take(&mut rows));
            columns.clear();
        } else if let Some(parsed) = parse_header(&fields) {
            finish(&mut frames, header.take(), std::mem::take(&mut rows));
            columns.clear();
            header = Some(parsed);
        } else if fields[0] == "LOC" {
            columns = fields;
        } else if fields.get(1).is_some_and(|f| f == "ZERO") {
            // `000001b4 ZERO terminator`: the end of the section.
        } else {
            // Anything else must be a row of the table just announced: never skip one silently.
            assert!(
                header.is_some() && fields.len() == columns.len() && columns.len() >= 2,
                "unexpected readelf line {line:?} (columns {columns:?})"
            );
            let column = |name: &str| {
                let i = columns.iter().position(|c| *c == name)?;
                Some(fields[i].clone())
            };
            rows.push(Row {
                loc: hex(&fields[0]),
                cfa: fields[1].clone(),
                rbp: column("rbp"),
                ra: column("ra"),
            });
        }
    }
    finish(&mut frames, header.take(), rows);
    frames
}

/// Splits a line into fields; a register rule prints as `r9 (r9)`, which stays one field.
fn fields(line: &str) -> Vec<String> {
    let mut fields: Vec<String> = Vec::new();
    for word in line.split_whitespace() {
        match fields.last_mut() {
            Some(last) if word.starts_with('(') => {
                last.push(' ');
                last.push_str(word);
            }
            _ => fields.push(word.to_string()),
        }
    }
    fields
}

/// Parses a CIE or FDE header line.
fn parse_header(fields: &[String]) -> Option<Header> {
    match fields.get(3)?.as_str() {
        "CIE" => Some(Header::Cie {
            offset: hex(&fields[0]),
            augmentation: fields.get(4)?.trim_matches('"').to_string(),
        }),
        "FDE" => {
            let cie = hex(fields.get(4)?.strip_prefix("cie=")?);
            let (start, end) = fields.get(5)?.strip_prefix("pc=")?.split_once("..")?;
            Some(Header::Fde(Fde {
                offset: hex(&fields[0]),
                cie,
                start: hex(start),
                end: hex(end),
                rows: Vec::new(),
            }))
        }
        _ => None,
    }
}

fn finish(frames: &mut Frames, header: Option<Header>, rows: Vec<Row>) {
    match header {
        Some(Header::Cie {
            offset,
            augmentation,
        }) => {
            frames.cies.insert(offset, Cie { augmentation, rows });
        }
        Some(Header::Fde(fde)) => frames.fdes.push(Fde { rows, ..fde }),
        None => {}
    }
}

fn hex(text: &str) -> u64 {
    u64::from_str_radix(text, 16)
        .unwrap_or_else(|_| panic!("readelf printed {text:?} for a hex number"))
}

#[test]
fn parses_cies_fdes_and_varying_columns() {
    let output = "\
Contents of the .eh_frame section:


00000030 0000000000000014 00000000 CIE \"zRS\" cf=1 df=-8 ra=16
   LOC           CFA      ra    
0000000000000000 rsp+8    c-8   

00000048 0000000000000024 0000001c FDE cie=00000030 pc=0000000000001020..00000000000010b0
   LOC           CFA      rbx   rbp   ra    
0000000000001020 rsp+16   u     c-16  c-8   
0000000000001030 exp      c-24  c-16  c-8   
0000000000001040 rsp+0    u     r5 (rdi) c-8   

00000070 0000000000000014 00000044 FDE cie=00000030 pc=00000000000010b0..00000000000010b8

00000084 ZERO terminator

Contents of the .debug_frame section:

00000000 0000000000000014 ffffffff CIE \"\" cf=1 df=-8 ra=16
";
    let frames = parse(output, ".eh_frame");
    assert_eq!(frames.cies.len(), 1);
    assert_eq!(frames.cies[&0x30].augmentation, "zRS");
    assert_eq!(frames.cies[&0x30].rows.len(), 1);
    assert_eq!(frames.fdes.len(), 2);
    let fde = &frames.fdes[0];
    assert_eq!(
        (fde.offset, fde.cie, fde.start, fde.end),
        (0x48, 0x30, 0x1020, 0x10b0)
    );
    assert_eq!(fde.rows.len(), 3);
    assert_eq!(fde.rows[2].rbp.as_deref(), Some("r5 (rdi)"));
    assert_eq!(fde.rows[1].cfa, "exp");
    assert_eq!(fde.rows[1].rbp.as_deref(), Some("c-16"));
    assert_eq!(fde.rows[1].ra.as_deref(), Some("c-8"));
    assert!(frames.fdes[1].rows.is_empty());
    let debug = parse(output, ".debug_frame");
    assert_eq!(debug.cies[&0].augmentation, "");
    assert!(debug.fdes.is_empty());
}
