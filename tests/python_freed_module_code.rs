//! Module code freed before sonde read it is named: a module's code object lives while the module
//! body runs (an import), then is freed, often before userspace reads the object the kernel
//! announced. The kernel sends the addresses of its name and file strings with the announcement,
//! which outlive the object (`<module>`, and the file name the module's functions share).
//!
//! `py_freed_module.py` compiles a 1 ms module body (48 sizes, so 48 addresses) and runs it, again
//! and again, under Debian's python3, recorded for 4 s. Every Python frame run from `churn` must be
//! named `<module>` in `generated_module.py`: none left unnamed (`?`). Reading the object alone left
//! 5-17% of them unnamed in each of 4 runs here (an object freed before its read stays unnamed at
//! its address for the whole recording).

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

#[test]
fn module_code_freed_before_it_was_read_is_named() {
    require_root();
    let python = interpreter(DEBIAN_PYTHON);
    let workload = start_script(&python, "py_freed_module.py", &[]);
    let (summary, samples) = record_python(workload.pid(), "4", &[], "python_freed_module");
    drop(workload);

    // The frames `churn` ran: the module bodies, named or not.
    let run: Vec<&Frame> = samples
        .iter()
        .filter_map(|s| {
            let churn = s.python_position("churn")?;
            s.frames[..churn].iter().rev().find(|f| f.is_python())
        })
        .collect();
    let named = run
        .iter()
        .filter(|f| f.function == "<module>" && f.file == "generated_module.py")
        .count();
    let unnamed: Vec<&&Frame> = run.iter().filter(|f| f.function == "?").collect();
    eprintln!(
        "{} samples, {} in a module body, {named} named, {} unnamed\n{summary}",
        samples.len(),
        run.len(),
        unnamed.len()
    );
    assert!(
        run.len() >= 100,
        "only {} samples in the module bodies of 4 s",
        run.len()
    );
    assert!(
        unnamed.is_empty(),
        "{} of {} module-body frames unnamed: {:?}",
        unnamed.len(),
        run.len(),
        unnamed.first()
    );
    assert_eq!(
        named,
        run.len(),
        "module-body frames named otherwise than <module> in generated_module.py"
    );
}
