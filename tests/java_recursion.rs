//! A Java recursion 400 deep (`Recursion`, OpenJDK 17, after the JIT's warm-up): the samples at its
//! bottom reach `Recursion.main` through all its levels. A Java frame takes two of a stored stack's
//! 1,024 words (its method or code and its position), so 400 of them need more than the 512 words a
//! stack held before.

use crate::common;
use common::{java::*, recursion::assert_whole_to_root, require_root};

#[test]
fn a_java_recursion_400_deep_is_whole_to_main() {
    require_root();
    let jvm = Jvm::start(JDK17, &[], "Recursion", &["60", "400"]);
    let pid = jvm.pid();
    let (samples, summary) = record(pid, "5", &[], "java_recursion");
    jvm.finish();
    let main = main_thread(&samples, pid);
    assert_whole_to_root(
        &main,
        "Recursion.bottom",
        "Recursion.recurse",
        "Recursion.main",
        300,
        &summary,
    );
}
