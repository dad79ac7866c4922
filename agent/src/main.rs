//! The `sonde` binary: parse the command line, start logging, run the command.

use clap::Parser as _;
use sonde::cli::{Cli, Command};

fn main() -> std::process::ExitCode {
    sonde::heap::one_arena();
    let cli = Cli::parse();
    sonde::telemetry::init(&cli.log);
    let result = match cli.command {
        Command::Record(args) => sonde::record::run(args),
        Command::Run(args) => sonde::daemon::run(*args),
        Command::Diff(args) => sonde::diff::run(args),
        Command::Status(args) => sonde::status::run(args),
        Command::Targets(args) => sonde::target_list::run(args),
        Command::Prune(args) => sonde::retention::command::run(args),
        Command::UnwindTable(args) => sonde::unwind::inspect::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // One line, the cause chain joined: the message tells the user what to do.
            eprintln!("sonde: error: {err:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
