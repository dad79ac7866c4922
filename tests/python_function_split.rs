//! Python functions in the stacks: Debian's own `/usr/bin/python3` (3.11, stripped, libpython linked
//! into the executable) runs `py_split.py`, which spends 50/30/20% of its CPU in three pure-Python
//! functions called from `main()`. The shares hold within ±5 points, every sample of the three has
//! `main` and `<module>` root-ward, and each frame's file is the script and its line inside the
//! function's body.

use crate::common;
use crate::common::python;

use common::require_root;
use python::*;

#[test]
fn debian_python_splits_fifty_thirty_twenty_by_function_with_file_and_line() {
    require_root();
    check_function_split(&interpreter(DEBIAN_PYTHON), "python_split_debian");
}
