//! A PHP program nobody here wrote: Debian's `phpcs` (PHP_CodeSniffer, run by Debian 12's `php8.2`)
//! checking PHPUnit's and PHP-Parser's sources as Debian ships them against PSR-12. ≥ 60% of its
//! samples carry PHP frames, ≤ 10% hold an unnamed one, and its tokenizer is among them by class,
//! method and file.

use std::process::{Command, Stdio};

use crate::common;
use common::{
    Workload,
    python::{of_pid, resolve_frames, weight},
    read_pprof, record_pid, require_root,
    scripted::PHP,
    temp_dir,
};

/// Debian's `phpcs` (package `php-codesniffer`, installed by `cargo xtask setup --peers`).
const PHPCS: &str = "/usr/bin/phpcs";

#[test]
fn phpcs_over_phpunit_is_named_in_php() {
    require_root();
    PHP.require();
    assert!(
        std::path::Path::new(PHPCS).exists(),
        "{PHPCS} is missing: `cargo xtask setup --peers` installs Debian's php-codesniffer"
    );
    let out = temp_dir("php_phpcs");
    // `phpcs` is Debian's script for the default `php`: run it under `php8.2` explicitly. It
    // reports the sources' style violations, which are not what is tested.
    let child = Command::new(PHP.binary())
        .args([
            PHPCS,
            "--standard=PSR12",
            "-q",
            "--report=summary",
            "--no-cache",
        ])
        .args(["/usr/share/php/PHPUnit", "/usr/share/php/PhpParser"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting phpcs");
    let phpcs = Workload::adopt(child);
    let pid = phpcs.pid();
    let profile = out.join("profile.pb.gz");
    // phpcs runs about 4 s here: 3 s of it.
    let summary = record_pid(pid, "3", &[], &profile);
    drop(phpcs);
    let samples = of_pid(resolve_frames(&read_pprof(&profile)), pid);
    let all = weight(&samples);
    let with_php = weight(samples.iter().filter(|s| PHP.frames(s).next().is_some()));
    let unnamed = weight(samples.iter().filter(|s| {
        PHP.frames(s)
            .any(|f| f.function == "?" || f.file.is_empty())
    }));
    let in_tokenizer = weight(samples.iter().filter(|s| {
        PHP.frames(s).any(|f| {
            f.function.starts_with("PHP_CodeSniffer\\Tokenizers\\")
                && f.file.contains("/CodeSniffer/src/Tokenizers/")
        })
    }));
    eprintln!(
        "phpcs: {all} samples, {with_php} with PHP frames, {unnamed} with an unnamed one, {in_tokenizer} in its tokenizer\n{summary}"
    );
    assert!(all >= 150, "only {all} samples of phpcs in 3 s\n{summary}");
    assert!(
        with_php as f64 >= 0.6 * all as f64,
        "only {with_php} of {all} samples carry PHP frames\n{summary}"
    );
    assert!(
        unnamed as f64 <= 0.1 * all as f64,
        "{unnamed} of {all} samples hold an unnamed PHP frame\n{summary}"
    );
    assert!(
        in_tokenizer > 0,
        "no sample in phpcs's tokenizer (PHP_CodeSniffer\\Tokenizers)\n{summary}"
    );
}
