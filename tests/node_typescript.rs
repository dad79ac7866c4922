//! A real JavaScript program without Node flags: the TypeScript compiler from the npm registry
//! transpiling its own `lib.es5.d.ts` in a loop. At least 60% of the main thread's samples hold a
//! frame of its own code: `transpileModule`, the API the loop calls, a JavaScript function of
//! `typescript.js` (everything the compiler does on that thread runs under it).

use crate::common;
use common::{
    java::{weight, weight_with},
    node::*,
    require_root, root,
};

#[test]
fn v8_typescript_compiler_functions_are_named() {
    require_root();
    let ts = root().join("target/peers/ts");
    assert!(
        ts.join("node_modules/typescript").exists(),
        "{} is missing: `cargo xtask setup --peers` installs typescript@5.9.3",
        ts.display()
    );
    let run = NodeRun::start(NODE20, &[], "typescript.js", &[ts.to_str().unwrap(), "60"]);
    let pid = run.pid();
    let (samples, summary) = record(pid, "6", &[], "node_typescript");
    let output = run.finish();
    let main = main_thread(&samples, pid);
    let total = weight(&main);
    let own = weight_with(&main, |f| f == "transpileModule");
    let stale = common::summary_field(&summary, "v8_frames_stale");
    eprintln!(
        "node_typescript: {own} of {total} main-thread samples under transpileModule, stale {stale}; {}",
        output.trim()
    );
    assert!(total > 300, "only {total} main-thread samples\n{summary}");
    assert!(
        own as f64 >= 0.6 * total as f64,
        "only {own} of {total} main-thread samples hold transpileModule"
    );
}
