//! A real Java program nobody here wrote: the JDK's own compiler (`com.sun.tools.javac` through
//! `javax.tools`) compiling generated sources in a loop, in one JVM without flags. At least 60% of
//! the main thread's samples hold a `com.sun.tools.javac` frame and at most 10% an unnamed frame.

use crate::common;
use common::{java::*, require_root};

#[test]
fn javac_through_javax_tools_is_named_in_its_own_methods() {
    require_root();
    let jvm = Jvm::start(JDK17, &[], "JavacLoop", &["60", "4"]);
    let pid = jvm.pid();
    let (samples, summary) = record(pid, "8", &[], "java17_javac");
    jvm.finish();
    let main = main_thread(&samples, pid);
    let all = weight(&main);
    let javac = weight_with(&main, |f| f.starts_with("com.sun.tools.javac."));
    let unnamed = weight_with(&main, |f| f == "?");
    eprintln!(
        "javac: main-thread samples {all}, in javac {javac}, with an unnamed frame {unnamed}\n{summary}"
    );
    // javac's own threads (C2 compiling javac, GC) share the two CPUs with its main thread.
    assert!(all > 150, "only {all} main-thread samples");
    assert!(
        javac as f64 >= 0.6 * all as f64,
        "only {javac} of {all} main-thread samples hold a com.sun.tools.javac frame"
    );
    assert!(
        unnamed as f64 <= 0.1 * all as f64,
        "{unnamed} of {all} main-thread samples hold an unnamed frame"
    );
}
