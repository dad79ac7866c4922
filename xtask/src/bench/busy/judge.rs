//! Whether one recorded stack is complete and named, from frame names alone, one rule for sonde's
//! folded stacks and for `perf script`: it reaches a thread root (glibc's, or Go's own), holds no
//! frame left unnamed (an address in anonymous or JIT memory, perf's `[unknown]`), and, where the
//! stack enters a language runtime, holds that language's frames.

use super::super::unwind::stacks::{NO_USER_STACK, ROOTS};

/// Go's thread and goroutine roots (as agent/src/runtimes/go's `ROOT_FUNCTIONS`).
const GO_ROOTS: [&str; 6] = [
    "runtime.goexit",
    "runtime.mstart",
    "runtime.rt0_go",
    "runtime.systemstack",
    "runtime.mcall",
    "runtime.morestack",
];

/// The language runtime a program runs its code in, if any, and how its stacks show entering it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Language {
    Native,
    /// HotSpot: the VM calls Java through `JavaCalls::call_helper`.
    Java,
    /// V8: C++ calls JavaScript through the `JSEntry` builtins.
    JavaScript,
    /// CPython: sonde puts the Python frames a `_PyEval_EvalFrameDefault` frame ran in its place;
    /// one left in the stack ran Python code that is not shown.
    Python,
}

/// What one stack is, for the section's table.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Verdict {
    pub(crate) rooted: bool,
    pub(crate) unnamed: bool,
    /// The stack entered the program's language without showing its frames.
    pub(crate) language_missing: bool,
    /// Taken while the process had no user stack (exit, exec).
    pub(crate) stackless: bool,
}

impl Verdict {
    pub(crate) fn complete_and_named(self) -> bool {
        self.rooted && !self.unnamed && !self.language_missing
    }
}

/// A frame as the profiler printed it: its name, and whether it is the kernel's.
pub(crate) struct Frame<'a> {
    pub(crate) name: &'a str,
    pub(crate) kernel: bool,
}

/// Judges `frames` (root first, kernel frames after the user leaf) of a program in `language`.
pub(crate) fn judge(frames: &[Frame], language: Language) -> Verdict {
    let user: Vec<&str> = frames
        .iter()
        .filter(|f| !f.kernel)
        .map(|f| base_name(f.name))
        .collect();
    let stackless = frames
        .iter()
        .any(|f| f.kernel && NO_USER_STACK.contains(&base_name(f.name)));
    Verdict {
        rooted: user
            .iter()
            .any(|f| ROOTS.contains(f) || GO_ROOTS.contains(f)),
        unnamed: frames
            .iter()
            .any(|f| !f.kernel && is_unnamed(f.name.trim())),
        language_missing: !language_shown(&user, language),
        stackless,
    }
}

/// A frame name without perf's offset and symbol version (`sym+0x1a`, `sym@@GLIBC_2.34`).
fn base_name(frame: &str) -> &str {
    let name = frame.split('@').next().unwrap_or(frame).trim();
    match name.rsplit_once('+') {
        Some((sym, offset)) if offset.starts_with("0x") && !sym.is_empty() => sym,
        _ => name,
    }
}

/// A frame in anonymous or JIT memory without a name: a bare address (sonde names a frame in no
/// mapping by its address), an offset into a memory region that is no file (sonde's `[jit]+0x2601b`,
/// `[anon]+0x10`), perf's `[unknown]` in no file.
fn is_unnamed(name: &str) -> bool {
    let hex = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_hexdigit());
    name == "[unknown]"
        || name == "?"
        || name.strip_prefix("0x").is_some_and(hex)
        || (name.starts_with('[')
            && name
                .split_once("]+0x")
                .is_some_and(|(_, offset)| hex(offset)))
}

/// Whether `user` (root first) shows `language`'s frames where it enters the language (always true
/// of a stack that does not).
fn language_shown(user: &[&str], language: Language) -> bool {
    match language {
        Language::Native => true,
        Language::Java => {
            !user.iter().any(|f| f.starts_with("JavaCalls::call_helper"))
                || user.iter().any(|f| is_java_method(f))
        }
        Language::JavaScript => {
            match user.iter().rposition(|f| f.starts_with("Builtins_JSEntry")) {
                None => true,
                Some(entry) => user[entry + 1..].iter().any(|f| is_javascript_function(f)),
            }
        }
        Language::Python => !user
            .iter()
            .any(|f| f.starts_with("_PyEval_EvalFrameDefault")),
    }
}

/// `package.Class.method` (sonde), as against HotSpot's C++ (`Class::method`).
fn is_java_method(name: &str) -> bool {
    !name.contains("::")
        && !name.contains(' ')
        && name
            .rsplit_once('.')
            .is_some_and(|(class, method)| !class.is_empty() && !method.is_empty())
}

/// A JavaScript function as sonde names it, as against V8's builtins and C++ and native frames.
fn is_javascript_function(name: &str) -> bool {
    !name.starts_with("Builtins_")
        && !name.contains("::")
        && !name.contains("+0x")
        && !is_unnamed(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(names: &[&'static str]) -> Vec<Frame<'static>> {
        names
            .iter()
            .map(|name| Frame {
                name,
                kernel: false,
            })
            .collect()
    }

    #[test]
    fn a_native_stack_is_complete_when_rooted_and_named() {
        let good = judge(&user(&["_start", "main", "lzma_code"]), Language::Native);
        assert!(good.complete_and_named());
        let cut = judge(&user(&["lzma_code", "0x1b0b500000003"]), Language::Native);
        assert!(!cut.rooted && cut.unnamed && !cut.complete_and_named());
        let perf = judge(
            &user(&["__libc_start_main@@GLIBC_2.34", "main+0x12", "[unknown]"]),
            Language::Native,
        );
        assert!(perf.rooted && perf.unnamed);
        let jit = judge(&user(&["start_thread", "[jit]+0x2601b"]), Language::Java);
        assert!(jit.unnamed);
        // A frame of a file without a symbol is named by its file (perf's `[unknown]` in a file is
        // written that way by the perf parser).
        let file = judge(
            &user(&["_start", "main", "liblzma.so.5.4.1+0x15a20"]),
            Language::Native,
        );
        assert!(file.complete_and_named());
        let go = judge(&user(&["runtime.goexit", "main.main"]), Language::Native);
        assert!(go.complete_and_named());
        // A process running its libraries' initializers, in ld.so before the program's `_start`.
        let init = judge(
            &user(&["_dl_start_user", "_dl_init", "call_init"]),
            Language::Native,
        );
        assert!(init.complete_and_named());
    }

    #[test]
    fn each_language_must_show_its_frames_where_the_stack_enters_it() {
        let java = ["start_thread", "JavaMain", "JavaCalls::call_helper"];
        let with = [&java[..], &["com.sun.tools.javac.main.Main.compile"]].concat();
        assert!(judge(&user(&with), Language::Java).complete_and_named());
        assert!(judge(&user(&java), Language::Java).language_missing);
        // A JIT compiler thread never enters Java.
        let c2 = [
            "start_thread",
            "thread_native_entry",
            "C2Compiler::compile_method",
        ];
        assert!(judge(&user(&c2), Language::Java).complete_and_named());

        let js = [
            "_start",
            "node::Start",
            "Builtins_JSEntry",
            "Builtins_JSEntryTrampoline",
        ];
        let with = [&js[..], &["transpileModule", "Builtins_CallFunction"]].concat();
        assert!(judge(&user(&with), Language::JavaScript).complete_and_named());
        assert!(judge(&user(&js), Language::JavaScript).language_missing);

        let merged = [
            "_start",
            "Py_RunMain",
            "PyEval_EvalCode",
            "<module>",
            "generate_tokens",
        ];
        assert!(judge(&user(&merged), Language::Python).complete_and_named());
        let unmerged = [
            "_start",
            "Py_RunMain",
            "PyEval_EvalCode",
            "_PyEval_EvalFrameDefault",
        ];
        assert!(judge(&user(&unmerged), Language::Python).language_missing);
    }

    #[test]
    fn exiting_samples_are_told_apart() {
        let frames = [
            Frame {
                name: "0x7f02a5a16409",
                kernel: false,
            },
            Frame {
                name: "do_exit",
                kernel: true,
            },
        ];
        let v = judge(&frames, Language::Native);
        assert!(v.stackless && !v.complete_and_named());
    }
}
