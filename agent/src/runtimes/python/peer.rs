//! Test support: a real Python interpreter running a script given on its command line, with pipes for
//! its input and output, killed when dropped.

use std::process::{Child, Command, Stdio};

pub(crate) struct Peer(pub(crate) Child);

impl Peer {
    /// `python -c script`; a missing interpreter fails the test, naming where it comes from.
    pub(crate) fn start(python: &str, script: &str) -> Self {
        Self(
            Command::new(python)
                .args(["-c", script])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("starting {python}: {e} (Debian's /usr/bin/python3 is the package python3; the pyenv builds are part of the machine image)")),
        )
    }
}

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
