//! Checking the spans on samples against the spans a traced program reported: the program prints
//! each span it runs as "SPAN OPERATION TRACE_ID SPAN_ID" (lowercase hex), and each sample inside
//! an operation's function must carry one of that operation's (trace, span) pairs as its
//! `trace_id` and `span_id` labels (OTEP 4947's thread context, read by sonde at the sample).

use std::{
    collections::{HashMap, HashSet},
    io::Read as _,
    process::{Child, Command, Stdio},
};

use super::Resolved;

/// A traced program running, its output kept for its spans; killed and reaped when dropped.
pub struct Traced {
    pub name: &'static str,
    pub pid: u32,
    child: Option<Child>,
    /// What it printed before [`Traced::spans`] read the rest.
    early: String,
}

impl Traced {
    /// Starts `cmd`, named `name` in messages.
    pub fn start(name: &'static str, mut cmd: Command) -> Self {
        let child = cmd
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        Self {
            name,
            pid: child.id(),
            child: Some(child),
            early: String::new(),
        }
    }

    /// Waits for its first span, so that a recording started next sees it in spans.
    pub fn first_span(&mut self) {
        let stdout = self.child.as_mut().unwrap().stdout.as_mut().unwrap();
        let mut seen = Vec::new();
        let mut byte = [0u8; 1];
        while !seen.ends_with(b"\n") || !seen.starts_with(b"SPAN") {
            if seen.ends_with(b"\n") {
                seen.clear();
            }
            match stdout.read(&mut byte) {
                Ok(1) => seen.push(byte[0]),
                _ => panic!("{} ended before its first span", self.name),
            }
        }
        self.early = String::from_utf8_lossy(&seen).into_owned();
    }

    /// Its spans, once it has exited.
    pub fn spans(&mut self) -> Reported {
        let mut child = self.child.take().unwrap();
        let mut out = std::mem::take(&mut self.early);
        child
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        let status = child.wait().unwrap();
        assert!(status.success(), "{} failed: {status}", self.name);
        Reported::parse(&out)
    }
}

impl Drop for Traced {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The (trace, span) pairs a program reported, by operation.
#[derive(Default, Debug)]
pub struct Reported(pub HashMap<String, HashSet<(String, String)>>);

impl Reported {
    /// Reads the `SPAN` lines of a program's output.
    pub fn parse(output: &str) -> Self {
        let mut spans: HashMap<String, HashSet<(String, String)>> = HashMap::new();
        for line in output.lines() {
            let mut words = line.split_whitespace();
            if words.next() != Some("SPAN") {
                continue;
            }
            let (Some(op), Some(trace), Some(span)) = (words.next(), words.next(), words.next())
            else {
                continue;
            };
            spans
                .entry(op.to_owned())
                .or_default()
                .insert((trace.to_owned(), span.to_owned()));
        }
        Self(spans)
    }
}

/// How the samples of one operation's function fared.
#[derive(Debug, Default)]
pub struct SpanTally {
    /// Samples in the function.
    pub samples: i64,
    /// Of those, samples with a span.
    pub labelled: i64,
    /// Of those, samples whose (trace, span) is one the operation reported.
    pub right: i64,
}

/// The samples of `samples` whose leaf-most frame named `function` is in `functions` (the first
/// user frame matching any of them), tallied against `reported[op]`.
pub fn tally(samples: &[&Resolved], function: &str, reported: &Reported, op: &str) -> SpanTally {
    let spans = reported.0.get(op).cloned().unwrap_or_default();
    let mut t = SpanTally::default();
    for s in samples {
        if !s.user().iter().any(|f| f.contains(function)) {
            continue;
        }
        let n = s.values[0];
        t.samples += n;
        if let (Some(trace), Some(span)) = (s.label("trace_id"), s.label("span_id")) {
            t.labelled += n;
            if spans.contains(&(trace.to_owned(), span.to_owned())) {
                t.right += n;
            }
        }
    }
    t
}

/// Asserts that the samples in `function` (between spans) carry no span, but for at most 3% of
/// them: the span is cleared as a span's function returns, and a sample in the few instructions
/// between may still see it. `who` names the program in messages.
pub fn assert_outside_spans(samples: &[&Resolved], function: &str, who: &str) {
    let (mut labelled, mut all) = (0, 0);
    for s in samples
        .iter()
        .filter(|s| s.user().iter().any(|f| f.contains(function)))
    {
        all += s.values[0];
        if s.label("span_id").is_some() {
            labelled += s.values[0];
        }
    }
    assert!(all > 0, "{who}: no sample between spans");
    assert!(
        labelled * 100 <= all * 3,
        "{who}: {labelled} of {all} samples between spans carry a span"
    );
}
