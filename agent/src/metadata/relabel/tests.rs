//! The cases of Prometheus's `relabel` package table, written anew from its documented behaviour:
//! each is an input label set, rules in sonde's `[[relabel]]` TOML, and the labels Prometheus ends
//! with (or `None`: the target is dropped).

use super::*;

#[derive(Debug, serde::Deserialize)]
struct File {
    relabel: Vec<RuleSpec>,
}

fn rules(toml_text: &str) -> Rules {
    let file: File = toml::from_str(toml_text).expect("test rules are valid TOML");
    Rules::compile(&file.relabel).expect("test rules are valid")
}

fn labels(pairs: &[(&str, &str)]) -> Labels {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const ABC: &[(&str, &str)] = &[("a", "foo"), ("b", "bar"), ("c", "baz")];

/// (name, input, rules, expected)
type Case = (
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
    Option<&'static [(&'static str, &'static str)]>,
);

const CASES: &[Case] = &[
    ("no rules", ABC, "relabel = []", Some(ABC)),
    (
        "replace with a capture group, twice",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = "f(.*)"
target_label = "d"
replacement = "ch${1}-ch${1}""#,
        Some(&[("a", "foo"), ("b", "bar"), ("c", "baz"), ("d", "choo-choo")]),
    ),
    (
        "two sources joined, then a rule reading the first rule's result",
        ABC,
        r#"[[relabel]]
source_labels = ["a", "b"]
regex = "f(.*);(.*)r"
target_label = "a"
replacement = "b${1}${2}m"
[[relabel]]
source_labels = ["c", "a"]
regex = "(b).*b(.*)ba(.*)"
target_label = "d"
replacement = "$1$2$2$3""#,
        Some(&[("a", "boobam"), ("b", "bar"), ("c", "baz"), ("d", "boooom")]),
    ),
    (
        "drop on a match",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = ".*o.*"
action = "drop"
[[relabel]]
source_labels = ["a"]
regex = "f(.*)"
target_label = "d"
replacement = "ch$1-ch$1""#,
        None,
    ),
    (
        "drop on a joined match",
        ABC,
        r#"[[relabel]]
source_labels = ["a", "b"]
regex = "f(.*);(.*)r"
action = "drop""#,
        None,
    ),
    (
        "the regex is anchored: a partial match does not drop",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = "o"
action = "drop""#,
        Some(ABC),
    ),
    (
        "keep without a match drops",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = "no-match"
action = "keep""#,
        None,
    ),
    (
        "keep on a match",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = "f.*"
action = "keep""#,
        Some(ABC),
    ),
    (
        "keep on the empty value of a missing label",
        &[("a", "")],
        r#"[[relabel]]
source_labels = ["a"]
regex = ""
action = "keep""#,
        Some(&[("a", "")]),
    ),
    (
        "replace without a match changes nothing",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = "no-match"
target_label = "d"
replacement = "$1""#,
        Some(ABC),
    ),
    (
        "replace matching only part changes nothing (anchored)",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = "f"
target_label = "d"
replacement = "$1""#,
        Some(ABC),
    ),
    (
        "replace to an empty value removes the label",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
regex = "foo"
target_label = "b"
replacement = "$1""#,
        Some(&[("a", "foo"), ("c", "baz")]),
    ),
    (
        "replace with the defaults copies a label",
        ABC,
        r#"[[relabel]]
source_labels = ["a"]
target_label = "d""#,
        Some(&[("a", "foo"), ("b", "bar"), ("c", "baz"), ("d", "foo")]),
    ),
    (
        "replace a constant from no sources",
        ABC,
        r#"[[relabel]]
target_label = "d"
replacement = "static""#,
        Some(&[("a", "foo"), ("b", "bar"), ("c", "baz"), ("d", "static")]),
    ),
    (
        "replace with named groups",
        &[("a", "some-name-value")],
        r#"[[relabel]]
source_labels = ["a"]
regex = "some-(?P<name>[^-]+)-(?P<value>.*)"
target_label = "${name}"
replacement = "${value}""#,
        Some(&[("a", "some-name-value"), ("name", "value")]),
    ),
    (
        "a target label from a group",
        &[("a", "some-name-value")],
        r#"[[relabel]]
source_labels = ["a"]
regex = "some-([^-]+)-([^,]+)"
target_label = "${1}"
replacement = "${2}""#,
        Some(&[("a", "some-name-value"), ("name", "value")]),
    ),
    (
        "a target label from a missing group changes nothing",
        &[("a", "some-name-value")],
        r#"[[relabel]]
source_labels = ["a"]
regex = "some-([^-]+)-([^,]+)"
target_label = "${3}"
replacement = "${1}""#,
        Some(&[("a", "some-name-value")]),
    ),
    (
        "a target label that expands to an invalid name changes nothing",
        &[("a", "some-name-0")],
        r#"[[relabel]]
source_labels = ["a"]
regex = "some-([^-]+)-([^,]+)"
target_label = "${2}"
replacement = "${1}""#,
        Some(&[("a", "some-name-0")]),
    ),
    (
        "$1x is the group named 1x (empty), not $1 then x",
        &[("a", "foo")],
        r#"[[relabel]]
source_labels = ["a"]
regex = "(f)oo"
target_label = "d"
replacement = "$1x-${1}x""#,
        Some(&[("a", "foo"), ("d", "-fx")]),
    ),
    (
        "$$ is a dollar",
        &[("a", "foo")],
        r#"[[relabel]]
source_labels = ["a"]
target_label = "d"
replacement = "$$${1}""#,
        Some(&[("a", "foo"), ("d", "$foo")]),
    ),
    (
        "the separator joins the sources, missing ones empty",
        ABC,
        r#"[[relabel]]
source_labels = ["a", "missing", "c"]
separator = "-"
target_label = "d""#,
        Some(&[("a", "foo"), ("b", "bar"), ("c", "baz"), ("d", "foo--baz")]),
    ),
    (
        "hashmod (md5, last 8 bytes big-endian)",
        ABC,
        r#"[[relabel]]
source_labels = ["c"]
target_label = "d"
action = "hashmod"
modulus = 1000"#,
        Some(&[("a", "foo"), ("b", "bar"), ("c", "baz"), ("d", "976")]),
    ),
    (
        "hashmod with a modulus above 2^32",
        &[("a", "foo")],
        r#"[[relabel]]
source_labels = ["a"]
target_label = "d"
action = "hashmod"
modulus = 17179869184"#,
        Some(&[("a", "foo"), ("d", "HASHMOD_FOO_2_34")]),
    ),
    (
        "labelmap copies matching names",
        &[("a", "foo"), ("b1", "bar"), ("b2", "baz")],
        r#"[[relabel]]
regex = "(b.*)"
replacement = "bar_${1}"
action = "labelmap""#,
        Some(&[
            ("a", "foo"),
            ("b1", "bar"),
            ("b2", "baz"),
            ("bar_b1", "bar"),
            ("bar_b2", "baz"),
        ]),
    ),
    (
        "labelmap of discovery labels, then the internal ones stripped",
        &[
            ("__meta_my_bar", "aaa"),
            ("__meta_my_baz", "bbb"),
            ("__meta_other", "ccc"),
        ],
        r#"[[relabel]]
regex = "__meta_(my.*)"
replacement = "${1}"
action = "labelmap""#,
        Some(&[
            ("__meta_my_bar", "aaa"),
            ("__meta_my_baz", "bbb"),
            ("__meta_other", "ccc"),
            ("my_bar", "aaa"),
            ("my_baz", "bbb"),
        ]),
    ),
    (
        "labeldrop",
        &[("a", "foo"), ("b1", "bar"), ("b2", "baz")],
        r#"[[relabel]]
regex = "(b.*)"
action = "labeldrop""#,
        Some(&[("a", "foo")]),
    ),
    (
        "labeldrop is anchored",
        &[("a", "foo"), ("b1", "bar"), ("b2", "baz")],
        r#"[[relabel]]
regex = "b"
action = "labeldrop""#,
        Some(&[("a", "foo"), ("b1", "bar"), ("b2", "baz")]),
    ),
    (
        "labelkeep",
        &[("a", "foo"), ("b1", "bar"), ("b2", "baz")],
        r#"[[relabel]]
regex = "(b.*)"
action = "labelkeep""#,
        Some(&[("b1", "bar"), ("b2", "baz")]),
    ),
    (
        "lowercase",
        &[("foo", "bAr123Foo")],
        r#"[[relabel]]
source_labels = ["foo"]
target_label = "foo_lower"
action = "Lowercase""#,
        Some(&[("foo", "bAr123Foo"), ("foo_lower", "bar123foo")]),
    ),
    (
        "uppercase",
        &[("foo", "bAr123Foo")],
        r#"[[relabel]]
source_labels = ["foo"]
target_label = "foo_upper"
action = "uppercase""#,
        Some(&[("foo", "bAr123Foo"), ("foo_upper", "BAR123FOO")]),
    ),
    (
        "keepequal keeps equal values",
        &[("__tmp_port", "1234"), ("port", "1234")],
        r#"[[relabel]]
source_labels = ["__tmp_port"]
target_label = "port"
action = "keepequal""#,
        Some(&[("__tmp_port", "1234"), ("port", "1234")]),
    ),
    (
        "keepequal drops different values",
        &[("__tmp_port", "1234"), ("port", "9090")],
        r#"[[relabel]]
source_labels = ["__tmp_port"]
target_label = "port"
action = "keepequal""#,
        None,
    ),
    (
        "dropequal drops equal values",
        &[("__tmp_port", "1234"), ("port", "1234")],
        r#"[[relabel]]
source_labels = ["__tmp_port"]
target_label = "port"
action = "dropequal""#,
        None,
    ),
    (
        "dropequal keeps different values",
        &[("__tmp_port", "1234"), ("port", "9090")],
        r#"[[relabel]]
source_labels = ["__tmp_port"]
target_label = "port"
action = "dropequal""#,
        Some(&[("__tmp_port", "1234"), ("port", "9090")]),
    ),
    (
        "a regex alternation is anchored as a whole",
        &[("a", "foobar")],
        r#"[[relabel]]
source_labels = ["a"]
regex = "foo|bar"
action = "keep""#,
        None,
    ),
];

#[test]
fn prometheus_relabel_cases() {
    for (name, input, text, expected) in CASES {
        let got = rules(text).apply(labels(input));
        let mut expected = expected.map(labels);
        // Computed, not written: the hash of "foo" modulo 2^34.
        if let Some(want) = expected.as_mut()
            && want.get("d").map(String::as_str) == Some("HASHMOD_FOO_2_34")
        {
            want.insert("d".into(), hash_mod("foo", 1 << 34).to_string());
        }
        assert_eq!(got, expected, "case {name:?}");
    }
}

#[test]
fn hashmod_is_prometheus_md5() {
    // md5("baz") ends in bytes whose big-endian u64 is ≡ 976 (mod 1000), Prometheus's own case.
    assert_eq!(hash_mod("baz", 1000), 976);
    assert_eq!(hash_mod("foo", 1000), 696);
    assert!(hash_mod("foo", 1 << 34) >= 1000);
}

#[test]
fn internal_labels_are_stripped() {
    let mut l = labels(&[("__meta_x", "1"), ("__sample_rate__", "19"), ("app", "a")]);
    strip_internal(&mut l);
    assert_eq!(l, labels(&[("app", "a")]));
}

#[test]
fn invalid_rules_name_their_index_and_reason() {
    let bad: &[(&str, &str)] = &[
        ("action = \"explode\"", "unknown action"),
        ("regex = \"(\"", "invalid regex"),
        ("action = \"replace\"", "needs a `target_label`"),
        (
            "action = \"hashmod\"\ntarget_label = \"d\"",
            "non-zero `modulus`",
        ),
        (
            "action = \"replace\"\ntarget_label = \"0abc\"",
            "not a valid `target_label`",
        ),
        (
            "action = \"lowercase\"\ntarget_label = \"${1}\"",
            "not a valid `target_label`",
        ),
        (
            "action = \"labeldrop\"\nsource_labels = [\"a\"]",
            "takes only a `regex`",
        ),
        (
            "action = \"keepequal\"\ntarget_label = \"a\"\nregex = \"x\"",
            "takes only `source_labels` and `target_label`",
        ),
        (
            "action = \"labelmap\"\nreplacement = \"a-b\"",
            "not a valid `replacement`",
        ),
    ];
    for (rule, reason) in bad {
        let text = format!("[[relabel]]\naction = \"keep\"\n[[relabel]]\n{rule}\n");
        let file: File = toml::from_str(&text).unwrap();
        let err = Rules::compile(&file.relabel).unwrap_err().to_string();
        assert!(
            err.starts_with("relabel rule 1: ") && err.contains(reason),
            "{rule}: {err}"
        );
    }
    let err = toml::from_str::<File>("[[relabel]]\nregexp = \"x\"\n").unwrap_err();
    assert!(err.to_string().contains("regexp"), "{err}");
}

#[test]
fn yaml_in_the_parca_shape_and_as_a_list() {
    let wrapped = "relabel_configs:\n  - source_labels: [__meta_process_comm]\n    regex: busy.*\n    action: keep\n  - target_label: team\n    replacement: core\n";
    let list = "- source_labels: [__meta_process_comm]\n  regex: busy.*\n  action: keep\n- target_label: team\n  replacement: core\n";
    for text in [wrapped, list] {
        let rules = Rules::compile(&parse_yaml(text).unwrap()).unwrap();
        let kept = rules.apply(labels(&[("__meta_process_comm", "busy-a")]));
        assert_eq!(
            kept,
            Some(labels(&[
                ("__meta_process_comm", "busy-a"),
                ("team", "core")
            ]))
        );
        assert_eq!(
            rules.apply(labels(&[("__meta_process_comm", "idle")])),
            None
        );
    }
    let err = parse_yaml("relabel_configs: 3\n").unwrap_err().to_string();
    assert!(err.contains("expected a list of rules"), "{err}");
}
