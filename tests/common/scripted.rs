//! Interpreters whose frames sonde appends after the native ones, as Debian ships them: CRuby
//! (Debian 12's `ruby3.1`, stripped `libruby`, and Debian 11's `ruby2.7`) and PHP (`php8.2`): their
//! split scripts, started and finished alike, and the language frames of a sample (the interpreter's
//! mapping, with file and line), read with the frame resolver the Python tests use.

use std::{
    io::{BufRead as _, BufReader, Read as _},
    ops::RangeInclusive,
    path::PathBuf,
    process::{Child, ChildStdout, Command, Stdio},
};

use super::python::{Frame, PySample, of_pid, resolve_frames, weight};

/// One interpreter: its name in sonde (`--runtimes`, its figures), its binary, where its workloads
/// live, the mapping sonde reports its frames in, and the Debian package that installs it.
pub struct Interpreter {
    pub runtime: &'static str,
    /// Its binary: installed, or (with `peer`) below the directory that environment variable
    /// names, a Debian package `cargo xtask setup --peers` unpacked, run with its own libraries.
    pub binary: &'static str,
    pub peer: Option<&'static str>,
    pub workloads: &'static str,
    pub mapping: &'static str,
    pub package: &'static str,
    /// What sonde puts before a function defined at the script's top level: Ruby names its class
    /// (`Object#churn`, as Ruby 3.4's backtraces do), PHP nothing.
    pub top_level: &'static str,
}

/// Debian 12's Ruby (`ruby3.1`, installed by `cargo xtask setup --peers`).
pub const RUBY: Interpreter = Interpreter {
    runtime: "ruby",
    binary: "/usr/bin/ruby3.1",
    peer: None,
    workloads: "tests/workloads/ruby",
    mapping: "[ruby]",
    package: "ruby3.1",
    top_level: "Object#",
};

/// Debian 12's PHP (`php8.2-cli`, installed by `cargo xtask setup --peers`).
pub const PHP: Interpreter = Interpreter {
    runtime: "php",
    binary: "/usr/bin/php8.2",
    peer: None,
    workloads: "tests/workloads/php",
    mapping: "[php]",
    package: "php8.2-cli",
    top_level: "",
};

/// Debian 11's Ruby 2.7 (`ruby2.7` and `libruby2.7` from Debian's archive, unpacked by `cargo xtask
/// setup --peers` into `SONDE_TEST_RUBY27`), run without RubyGems, which it does not unpack.
pub const RUBY27: Interpreter = Interpreter {
    runtime: "ruby",
    binary: "usr/bin/ruby2.7",
    peer: Some("SONDE_TEST_RUBY27"),
    workloads: "tests/workloads/ruby",
    mapping: "[ruby]",
    package: "ruby2.7 (Debian 11, from its archive)",
    top_level: "Object#",
};

impl Interpreter {
    /// The directory a peer interpreter is unpacked in.
    fn peer_root(&self) -> Option<PathBuf> {
        let var = self.peer?;
        let root = std::env::var_os(var)
            .unwrap_or_else(|| panic!("{var} is unset: run the tests with `cargo xtask test`"));
        Some(PathBuf::from(root))
    }

    /// Its binary's path.
    pub fn binary(&self) -> PathBuf {
        match self.peer_root() {
            Some(root) => root.join(self.binary),
            None => PathBuf::from(self.binary),
        }
    }

    /// The name sonde gives `function`, defined at a script's top level.
    pub fn top(&self, function: &str) -> String {
        format!("{}{function}", self.top_level)
    }

    /// A workload's script.
    pub fn script(&self, name: &str) -> PathBuf {
        super::root().join(self.workloads).join(name)
    }

    /// The language frames of `s`, leaf first.
    pub fn frames<'s>(&self, s: &'s PySample) -> impl Iterator<Item = &'s Frame> + use<'s> {
        let mapping = self.mapping;
        s.frames.iter().filter(move |f| f.mapping == mapping)
    }

    /// Panics, saying how to install it, unless the interpreter is here.
    pub fn require(&self) {
        assert!(
            self.binary().exists(),
            "{} is missing: `cargo xtask setup --peers` installs Debian's {}",
            self.binary().display(),
            self.package
        );
    }

    /// `interpreter flags script args`, started; returns once it prints `ready`. Its output's rest
    /// is read by [`finish`].
    pub fn start(
        &self,
        flags: &[&str],
        name: &str,
        args: &[&str],
    ) -> (Child, BufReader<ChildStdout>) {
        self.require();
        let binary = self.binary();
        let binary = binary.display();
        let mut command = Command::new(self.binary());
        if let Some(root) = self.peer_root() {
            command.env("LD_LIBRARY_PATH", root.join("usr/lib/x86_64-linux-gnu"));
        }
        let mut child = command
            .args(flags)
            .arg(self.script(name))
            .args(args)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {binary} {name}: {e}"));
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        if line.trim() != "ready" {
            let _ = child.kill();
            panic!("{binary} {name} did not start (see its stderr above): {line:?}");
        }
        (child, out)
    }
}

/// A split workload: a script that spends a known share of its CPU in each of three burners (each
/// under both `roots`, each calling `churn`, where the time goes) and measures that split itself.
pub struct Split<'a> {
    pub script: &'a str,
    pub roots: [&'a str; 2],
    /// The lines of each burner's body in the script.
    pub body: &'a dyn Fn(&str) -> RangeInclusive<i64>,
}

impl Interpreter {
    /// Runs `split` under `interpreter flags`, records it at 199 Hz for 9 s (~1,800 samples, so a
    /// share's sampling error, 1.2 points for 50%, stays well inside the ±5 asked), and checks what
    /// every split test asks: the language's walks did not fail; each burner's share of the burners'
    /// samples within 5 points of the script's own accounting; ≥ 80% of each burner's samples under
    /// both roots; each burner's frame in the script's file, at a line of its body; `churn` in ≥ 90%
    /// of the burners' samples. Returns the samples. `name` names its files.
    pub fn split(&self, flags: &[&str], split: &Split, name: &str) -> Vec<PySample> {
        super::require_root();
        let (child, out) = self.start(flags, split.script, &["11"]);
        let pid = child.id();
        let profile = super::temp_dir(name).join("profile.pb.gz");
        let summary = super::record_pid(pid, "9", &["--frequency", "199"], &profile);
        let accounted = super::java::accounted(&finish(child, out));
        let samples = of_pid(resolve_frames(&super::read_pprof(&profile)), pid);
        let all = weight(&samples);
        let runtime = self.runtime;
        eprintln!("{runtime} split: {all} samples, accounted {accounted:?}\n{summary}");
        assert!(all > 1000, "only {all} samples in 9 s at 199 Hz\n{summary}");
        super::assert_sample_cost(&summary, runtime);
        let field = |f: &str| super::summary_field(&summary, &format!("{runtime}_{f}"));
        let (walks, faults) = (field("walks"), field("read_fault") + field("truncated"));
        assert!(
            walks >= 0.9 * all as f64 && faults <= 0.01 * walks,
            "{walks} {runtime} walks for {all} samples, {faults} failed\n{summary}"
        );
        let has = |s: &PySample, f: &str| self.frames(s).any(|p| p.function == f);
        let of_any = |s: &&PySample| accounted.iter().any(|(f, _)| has(s, f));
        let burners = weight(samples.iter().filter(of_any));
        let file = self.script(split.script);
        for (function, want) in &accounted {
            let of: Vec<&PySample> = samples.iter().filter(|s| has(s, function)).collect();
            let got = 100.0 * weight(of.iter().copied()) as f64 / burners as f64;
            let [outer, root] = split.roots;
            let rooted = |s: &&PySample| has(s, outer) && has(s, root);
            let under = weight(of.iter().copied().filter(rooted)) as f64
                / weight(of.iter().copied()).max(1) as f64;
            eprintln!(
                "{function}: {got:.1}% (accounted {want:.1}%), under {outer} {:.1}%",
                100.0 * under
            );
            assert!(
                (got - want).abs() <= 5.0,
                "{function} has {got:.1}% of the burners' samples, the script measured {want:.1}%"
            );
            assert!(
                under >= 0.8,
                "{function} is under {outer} and {root} in only {:.1}% of its samples",
                100.0 * under
            );
            // The burner's frame: the script's file, a line of its body (its call of `churn`).
            let lines = (split.body)(function);
            for s in &of {
                let f = self.frames(s).find(|f| f.function == *function).unwrap();
                assert!(
                    f.file == file.to_str().unwrap() && lines.contains(&f.line),
                    "{function} at {}:{}, want {}:{lines:?}",
                    f.file,
                    f.line,
                    file.display()
                );
            }
        }
        // `churn`, where the time goes, is a language frame above each burner, in the loop's place.
        let churn = self.top("churn");
        let in_churn = weight(samples.iter().filter(|s| has(s, &churn)));
        assert!(
            in_churn as f64 >= 0.9 * burners as f64,
            "churn is in only {in_churn} of the burners' {burners} samples"
        );
        samples
    }
}

/// Checks the samples of a script `language` ran with its JIT on: each frame in the JIT's code
/// (mapping `jit`) took its language frames' place, but for the rare leaf-most one caught without
/// any (≤ 1% of samples, none with a language frame leafward of it), and ≥ 95% of samples go on
/// below it to `entry` (the interpreter's native caller of its loop) and the process's start.
pub fn assert_jit_unwound(samples: &[PySample], language: &Interpreter, jit: &str, entry: &str) {
    let position =
        |s: &PySample, path: &str| s.frames.iter().position(|f| f.mapping.contains(path));
    let in_jit: Vec<&PySample> = samples
        .iter()
        .filter(|s| position(s, jit).is_some())
        .collect();
    // The one JIT frame sonde keeps is that of a loop call caught entering or leaving (no language
    // frame of its own yet, or any more): the leaf-most one, all language frames rootward of it.
    let misplaced = in_jit
        .iter()
        .filter(|s| position(s, language.mapping).is_some_and(|at| Some(at) < position(s, jit)))
        .count();
    let (in_jit, all) = (weight(in_jit), weight(samples));
    let complete = weight(samples.iter().filter(|s| {
        let has = |name: &str| s.frames.iter().any(|f| f.function == name);
        has(entry) && has("__libc_start_call_main")
    }));
    assert!(
        misplaced == 0
            && in_jit as f64 <= 0.01 * all as f64
            && complete as f64 >= 0.95 * all as f64,
        "{in_jit} of {all} samples keep a JIT frame ({misplaced} of them below a {} frame), \
         {complete} reach {entry} and libc's start",
        language.mapping
    );
}

/// Waits for the workload to exit; the rest of its output.
pub fn finish(mut child: Child, mut out: BufReader<ChildStdout>) -> String {
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "the workload failed: {status}\n{rest}");
    rest
}
