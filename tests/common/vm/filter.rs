//! Which tests this run of the test binary runs, read from its arguments as libtest reads them
//! (filters matched as substrings, or whole names with `--exact`; `--skip` filters out), so that the
//! guest pool boots only the guests whose tests run.

/// libtest's options that take a value as the next argument.
const WITH_VALUE: [&str; 7] = [
    "--skip",
    "--test-threads",
    "--logfile",
    "--color",
    "--format",
    "--shuffle-seed",
    "-Z",
];

/// Whether the test named `name` (with its module path) runs in this run.
pub fn selects(name: &str) -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let exact = args.iter().any(|a| a == "--exact");
    let matches = |filter: &str| {
        if exact {
            name == filter
        } else {
            name.contains(filter)
        }
    };
    let (mut filters, mut skips) = (Vec::new(), Vec::new());
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            filters.extend(args.by_ref());
        } else if arg == "--skip" {
            skips.extend(args.next());
        } else if WITH_VALUE.contains(&arg.as_str()) {
            args.next();
        } else if !arg.starts_with('-') {
            filters.push(arg);
        }
    }
    (filters.is_empty() || filters.iter().any(|f| matches(f))) && !skips.iter().any(|s| matches(s))
}
