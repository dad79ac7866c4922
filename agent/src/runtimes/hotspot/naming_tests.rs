//! The symbolizer on stacks holding Java frames as the kernel stores them (two words each, in place
//! among the native frames), built from a live OpenJDK 17: compiled code with its inlined callee, a
//! native frame between, an interpreted method, a stale frame, and words that do not pair up.

use std::path::Path;

use sonde_abi::hotspot::{kind, pack_frame};

use crate::{
    profile::ProfileKind,
    runtimes::Runtime,
    runtimes::hotspot::live::{JDK17, Live, line_of},
    symbolize::test_support::{sample, symbolizer},
};

#[test]
fn java_frames_stay_in_place_among_native_ones_and_are_counted() {
    let mut live = Live::start(Path::new(JDK17));
    let pid = live.run.pid();
    let nm = live.compiled("burnA");
    let (compile_id, call) = live.inlined_call(nm);
    let cold = live.method("cold");
    let check = live.const_method_check(cold);
    let libjvm = live
        .info
        .mappings
        .iter()
        .find(|m| m.module.path.ends_with("/libjvm.so"))
        .expect("libjvm.so is mapped")
        .module
        .clone();
    let native = libjvm.start + 0x1000;
    let [leaf_head, leaf_data] =
        pack_frame(kind::COMPILED, nm, true, u64::from(call - 1), compile_id);
    let [cold_head, cold_data] = pack_frame(kind::INTERPRETED, cold, false, 5, check);
    let [stale_head, stale_data] = pack_frame(
        kind::COMPILED,
        nm,
        false,
        u64::from(call),
        compile_id ^ 0x55,
    );
    let words = vec![
        leaf_head, leaf_data, native, cold_head, cold_data, cold_data, stale_head, stale_data,
        leaf_head,
    ];
    let mut s = symbolizer();
    let infos = live.table.ensure_all([pid]);
    let out = s.symbolize(ProfileKind::Cpu, &[sample(pid, words, 2)], &infos, 1);
    let frames = &out[0].frames;
    assert_eq!(frames.len(), 4, "{frames:?}");
    // The compiled leaf: one frame, its inline chain innermost first.
    let leaf: Vec<(&str, Option<u32>)> = frames[0]
        .symbols
        .iter()
        .map(|s| (s.name.as_str(), s.line))
        .collect();
    assert_eq!(
        leaf,
        [
            ("Burner.tiny", Some(line_of("tiny_call"))),
            ("Burner.burnA", Some(line_of("burn_call")))
        ]
    );
    // The native word in place, in libjvm.
    assert_eq!(frames[1].address, native);
    assert!(
        frames[1]
            .module
            .as_ref()
            .unwrap()
            .path
            .ends_with("/libjvm.so")
    );
    assert_eq!(frames[2].function(), Some("Burner.cold"));
    assert_eq!(frames[2].symbols[0].line, Some(line_of("cold_second")));
    assert_eq!(frames[3].display_name(), format!("[java]+{nm:#x}"));
    let java = s.frames_of(Runtime::Java);
    assert_eq!(
        (
            java.stacks,
            java.frames,
            java.unreadable,
            java.stale,
            java.corrupt,
            java.dropped
        ),
        (2, 6, 0, 2, 4, 0)
    );

    // Without Java detection, Java frames are dropped (counted), the native one stays.
    let mut without = crate::capture::Capturer::default();
    let infos = without.ensure_all([pid]);
    assert!(crate::runtimes::hotspot::jvm_of(infos[&pid].as_ref().unwrap()).is_none());
    let mut s = symbolizer();
    let words = vec![leaf_head, leaf_data, native];
    let out = s.symbolize(ProfileKind::Cpu, &[sample(pid, words, 1)], &infos, 1);
    assert_eq!(out[0].frames.len(), 1);
    assert_eq!(out[0].frames[0].address, native);
    assert_eq!(
        (
            s.frames_of(Runtime::Java).frames,
            s.frames_of(Runtime::Java).dropped
        ),
        (0, 1)
    );
}
