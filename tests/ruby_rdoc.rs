//! A Ruby program nobody here wrote: Debian's `rdoc` (Ruby's documentation generator, run by
//! Debian 12's `ruby3.1`) over RubyGems' sources as Debian ships them. ≥ 60% of its samples carry
//! Ruby frames, ≤ 10% hold an unnamed one, and rdoc's own parser is among them by name and file,
//! its methods named with their classes (`RDoc::Parser::Ruby#...`).

use std::process::{Command, Stdio};

use crate::common;
use common::{
    Workload,
    python::{of_pid, resolve_frames, weight},
    read_pprof, record_pid, require_root,
    scripted::RUBY,
    temp_dir,
};

#[test]
fn rdoc_over_rubygems_is_named_in_ruby() {
    require_root();
    let out = temp_dir("ruby_rdoc");
    let docs = out.join("doc");
    let _ = std::fs::remove_dir_all(&docs);
    // `rdoc` is Debian's script for the default `ruby`: run it under `ruby3.1` explicitly.
    RUBY.require();
    let child = Command::new(RUBY.binary())
        .args(["/usr/bin/rdoc", "--quiet", "--op"])
        .arg(&docs)
        .arg("/usr/lib/ruby/3.1.0/rubygems")
        .stdout(Stdio::null())
        // rdoc warns about RubyGems' missing doc includes; its output is not what is tested.
        .stderr(Stdio::null())
        .spawn()
        .expect("starting rdoc");
    let rdoc = Workload::adopt(child);
    let pid = rdoc.pid();
    let profile = out.join("profile.pb.gz");
    // rdoc runs about 5 s here: 3 s of it.
    let summary = record_pid(pid, "3", &[], &profile);
    drop(rdoc);
    let samples = of_pid(resolve_frames(&read_pprof(&profile)), pid);
    let all = weight(&samples);
    let with_ruby = weight(samples.iter().filter(|s| RUBY.frames(s).next().is_some()));
    let unnamed = weight(samples.iter().filter(|s| {
        RUBY.frames(s)
            .any(|f| f.function == "?" || f.file.is_empty())
    }));
    let in_parser = weight(samples.iter().filter(|s| {
        RUBY.frames(s)
            .any(|f| f.file.contains("/rdoc/") && f.file.contains("parser"))
    }));
    eprintln!(
        "rdoc: {all} samples, {with_ruby} with Ruby frames, {unnamed} with an unnamed one, {in_parser} in rdoc's parsers\n{summary}"
    );
    assert!(all >= 150, "only {all} samples of rdoc in 3 s\n{summary}");
    assert!(
        with_ruby as f64 >= 0.6 * all as f64,
        "only {with_ruby} of {all} samples carry Ruby frames\n{summary}"
    );
    assert!(
        unnamed as f64 <= 0.1 * all as f64,
        "{unnamed} of {all} samples hold an unnamed Ruby frame\n{summary}"
    );
    assert!(
        in_parser > 0,
        "no sample in rdoc's parsers (rdoc/parser/*.rb)\n{summary}"
    );
    // Its methods carry their classes, read from the process: `RDoc::Parser::Ruby#parse_statements`.
    let parser_frames: Vec<&str> = samples
        .iter()
        .flat_map(|s| RUBY.frames(s))
        .filter(|f| f.file.contains("/rdoc/parser/"))
        .map(|f| f.function.as_str())
        .collect();
    let of_rdoc = parser_frames
        .iter()
        .filter(|n| n.contains("RDoc::Parser"))
        .count();
    assert!(
        of_rdoc as f64 >= 0.9 * parser_frames.len() as f64,
        "only {of_rdoc} of {} frames in rdoc's parsers name an RDoc::Parser class: {:?}",
        parser_frames.len(),
        &parser_frames[..parser_frames.len().min(20)]
    );
}
