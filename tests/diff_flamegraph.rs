//! The differential flame graph: a valid SVG of the new profile whose frames are red where the stack grew
//! and blue where it shrank, with the base rescaled so an unchanged share stays white.

use crate::common::diff_fixtures as fixtures;

use fixtures::{Kind, profile, scratch, sonde_diff, stack, write};

/// The `fill="rgb(r,g,b)"` of the frame whose tooltip starts with `function (`.
fn fill_of(svg: &str, function: &str) -> (u8, u8, u8) {
    let title = format!("<title>{function} (");
    let at = svg
        .find(&title)
        .unwrap_or_else(|| panic!("no frame {function} in the SVG"));
    let rest = &svg[at..];
    let fill = &rest[rest.find("fill=\"rgb(").expect("a filled rectangle") + 10..];
    let rgb: Vec<u8> = fill[..fill.find(')').unwrap()]
        .split(',')
        .map(|c| c.trim().parse().unwrap())
        .collect();
    (rgb[0], rgb[1], rgb[2])
}

#[test]
fn grown_frames_are_red_and_shrunk_frames_blue() {
    let dir = scratch("flamegraph");
    // Base 10 s, new 20 s with twice the samples: `same` keeps its share and must stay white.
    let base = write(
        &dir.join("b.pb.gz"),
        &profile(
            Kind::Cpu,
            10.0,
            &[
                stack("main;grow", 100),
                stack("main;shrink", 300),
                stack("main;same", 600),
            ],
        ),
    );
    let new = write(
        &dir.join("n.pb.gz"),
        &profile(
            Kind::Cpu,
            20.0,
            &[
                stack("main;grow", 600),
                stack("main;shrink", 200),
                stack("main;same", 1_200),
            ],
        ),
    );
    let svg_path = dir.join("diff.svg");
    let out = sonde_diff([
        "--base".as_ref(),
        base.as_os_str(),
        "--new".as_ref(),
        new.as_os_str(),
        "--flamegraph".as_ref(),
        svg_path.as_os_str(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(
        svg.starts_with("<?xml") && svg.contains("<svg") && svg.trim_end().ends_with("</svg>"),
        "not an SVG"
    );
    assert_eq!(svg.matches("<svg").count(), svg.matches("</svg>").count());

    let (r, g, b) = fill_of(&svg, "grow");
    assert!(
        r == 255 && g < 200 && g == b,
        "grow must be red, is rgb({r},{g},{b})"
    );
    let (r, g, b) = fill_of(&svg, "shrink");
    assert!(
        b == 255 && r < 255 && r == g,
        "shrink must be blue, is rgb({r},{g},{b})"
    );
    assert_eq!(
        fill_of(&svg, "same"),
        (250, 250, 250),
        "an unchanged share is white"
    );
    // Widths are the new profile's: grow has 600 of 2,000 samples (30%).
    assert!(
        svg.contains("<title>grow (6,000,000,000 nanoseconds, 30.00%"),
        "grow's tooltip"
    );
}
