//! Detection and layouts of the Node.js builds the tests run (Debian's Node 20, and Node 18 and 22
//! from the npm registry when `cargo xtask setup --peers` fetched them).

use std::fs::File;

use super::{
    elf::{READER, V8Symbols},
    layout::Layout,
};
use crate::process::elf_info::ElfInfo;

/// The Node.js binaries setup installs, by major (Debian's is 20).
pub(crate) fn node_binaries() -> Vec<(u32, std::path::PathBuf)> {
    let peers = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/peers/node");
    let mut out = vec![(20, std::path::PathBuf::from("/usr/bin/node"))];
    for (major, version) in [(18, "18.20.8"), (22, "22.23.5")] {
        let path = peers.join(version).join("package/bin/node");
        if path.exists() {
            out.push((major, path));
        }
    }
    out
}

#[test]
fn every_node_of_the_tests_has_a_layout_the_kernel_can_read() {
    for (major, path) in node_binaries() {
        let (_, facts) = ElfInfo::read_with(&File::open(&path).unwrap(), &[READER]);
        let symbols = facts
            .first()
            .and_then(|(_, f)| f.downcast_ref::<V8Symbols>())
            .unwrap_or_else(|| panic!("{} exports no v8dbg_*", path.display()));
        let layout = Layout::new(symbols).unwrap_or_else(|e| panic!("Node {major}: {e}"));
        let (v8_major, ..) = layout.version;
        assert_eq!(
            v8_major,
            [10, 11, 12][(major as usize - 18) / 2],
            "Node {major}"
        );
        assert_eq!(
            (
                layout.fp_marker,
                layout.fp_function,
                layout.fp_bytecode_offset
            ),
            (8, 16, 40)
        );
        assert!(layout.types.js_function.0 < layout.types.js_function.1);
        assert_eq!(layout.frame_type(1), Some("Entry"), "Node {major}");
        let settings = layout.kernel_settings(&[(0x1000, 0x2000)]);
        assert_eq!(settings.builtin_count, 1);
        // The instruction start is a pointer from V8 11 (Node 20).
        assert_eq!(layout.code_start_is_pointer, major >= 20, "Node {major}");
    }
}
