//! The `sonde` binary: parse the command line, start logging, run the command.

fn main() -> anyhow::Result<()> {
    Ok(())
}
