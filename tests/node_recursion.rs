//! A JavaScript recursion 400 deep (`recursion.js` under Node 20): the samples at its bottom reach
//! `main` through all its levels. A JavaScript frame takes two of a stored stack's 1,024 words (its
//! code and its pc), so 400 of them need more than the 512 words a stack held before. TurboFan
//! inlines some levels of the recursion into others, and sonde shows the frames V8 has on the
//! stack, so not every sample holds all 401.

use crate::common;
use common::{node::*, recursion::assert_whole_to_root, require_root};

#[test]
fn a_javascript_recursion_400_deep_is_whole_to_main() {
    require_root();
    let run = NodeRun::start(NODE20, &[], "recursion.js", &["60", "400"]);
    let pid = run.pid();
    let (samples, summary) = record(pid, "5", &[], "node_recursion");
    run.finish();
    let main = main_thread(&samples, pid);
    assert_whole_to_root(&main, "bottom", "recurse", "main", 300, &summary);
}
