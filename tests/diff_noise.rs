//! Noise marking: a change of a tenth of a point is noise on a small profile and signal on a large one.

use crate::common::diff_fixtures as fixtures;

use fixtures::{Kind, diff_json, num, profile, row, scratch, sonde_diff, stack, write};

/// Base: `f` is 10.0% of `total` samples; new: 10.1%.
fn tenth_of_a_point(name: &str, total: i64) -> [std::ffi::OsString; 4] {
    let dir = scratch(name);
    let f = total / 10;
    let bump = total / 1000;
    let base = write(
        &dir.join("b.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[stack("main;f", f), stack("main;g", total - f)],
        ),
    );
    let new = write(
        &dir.join("n.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[stack("main;f", f + bump), stack("main;g", total - f - bump)],
        ),
    );
    ["--base".into(), base.into(), "--new".into(), new.into()]
}

#[test]
fn a_tenth_of_a_point_on_a_small_profile_is_noise() {
    let args = tenth_of_a_point("noise_small", 1_000);
    let (json, _) = diff_json(&args);
    let (_, f) = row(&json, "f");
    assert!((num(f, "delta_self_pct") - 0.1).abs() < 1e-9, "{f}");
    assert_eq!(f["within_noise"], true, "{f}");
    // Binomial: sqrt(0.1 * 0.9 / 1000) per side, about 1.34 points for the difference; 2 sigma ~ 2.7.
    assert!(
        (num(f, "noise_self_pct") - 2.0 * (2.0 * 0.09 / 1000.0f64).sqrt() * 100.0).abs() < 0.01,
        "{f}"
    );

    let out = sonde_diff(&args);
    let table = String::from_utf8(out.stdout).unwrap();
    let line = table.lines().find(|l| l.ends_with(" f")).unwrap();
    assert!(
        line.contains("noise"),
        "the table must mark the row: {line}"
    );
}

#[test]
fn the_same_change_on_a_large_profile_is_signal() {
    let (json, _) = diff_json(tenth_of_a_point("noise_large", 1_000_000));
    let (rank, f) = row(&json, "f");
    assert!((num(f, "delta_self_pct") - 0.1).abs() < 1e-9, "{f}");
    assert_eq!(f["within_noise"], false, "{f}");
    assert!(rank <= 1);
}

#[test]
fn noise_sigma_widens_the_margin() {
    let mut args = tenth_of_a_point("noise_sigma", 1_000_000).to_vec();
    args.extend(["--noise-sigma".into(), "5".into()]);
    let (json, _) = diff_json(args);
    assert_eq!(row(&json, "f").1["within_noise"], true);
}

#[test]
fn without_a_count_type_samples_are_estimated_from_the_period() {
    let dir = scratch("noise_period");
    let stacks = |f: i64| [stack("main;f", f), stack("main;g", 1_000 - f)];
    let mut noise = Vec::new();
    for kind in [Kind::Cpu, Kind::CpuNanosOnly] {
        let base = write(&dir.join("b.pb.gz"), &profile(kind, 10.0, &stacks(100)));
        let new = write(&dir.join("n.pb.gz"), &profile(kind, 10.0, &stacks(101)));
        let (json, _) = diff_json([
            "--base".as_ref(),
            base.as_os_str(),
            "--new".as_ref(),
            new.as_os_str(),
        ]);
        assert_eq!(json["totals"]["base"]["samples"], 1_000.0, "{json}");
        noise.push(num(row(&json, "f").1, "noise_self_pct"));
    }
    assert!(
        (noise[0] - noise[1]).abs() < 1e-9,
        "same sample counts, same noise: {noise:?}"
    );
}

/// A sampled off-CPU profile: 1,000 tracked episodes standing for 100,000 events. Its noise is that of
/// 1,000 episodes (the `tracked` count), so a tenth of a point is noise although the estimated event
/// counts are as large as those of the profile above that makes it signal.
#[test]
fn a_sampled_off_cpu_profile_is_as_noisy_as_its_tracked_episodes() {
    let dir = scratch("noise_sampled");
    let one_in = 100;
    let (total, f, bump) = (1_000, 100, 1);
    let side = |name: &str, f: i64| {
        write(
            &dir.join(name),
            &profile(
                Kind::OffCpuSampled { one_in },
                10.0,
                &[stack("main;f", f), stack("main;g", total - f)],
            ),
        )
    };
    let (base, new) = (side("b.pb.gz", f), side("n.pb.gz", f + bump));
    let (json, _) = diff_json(["--base".into(), base, "--new".into(), new]);
    let (_, row_f) = row(&json, "f");
    assert!((num(row_f, "delta_self_pct") - 0.1).abs() < 1e-9, "{row_f}");
    assert_eq!(row_f["within_noise"], true, "{row_f}");
    assert!(
        (num(row_f, "noise_self_pct") - 2.0 * (2.0 * 0.09 / 1000.0f64).sqrt() * 100.0).abs() < 0.01,
        "noise sized on 1,000 tracked episodes, not 100,000 events: {row_f}"
    );
}
