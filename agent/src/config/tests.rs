use super::*;

fn merge(text: &str, args: &RunArgs) -> Result<DaemonConfig, ConfigError> {
    DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), args, &|_| None)
}

#[test]
fn flags_win_over_the_file() {
    let args = RunArgs {
        otlp_endpoint: Some("http://127.0.0.1:4317".into()),
        export_interval: Some(15),
        labels: vec!["team=core".into()],
        ..Default::default()
    };
    let c = merge(
        "export_interval_secs = 30\n[labels]\nenv = \"prod\"\nteam = \"x\"\n",
        &args,
    )
    .unwrap();
    assert_eq!(c.export_interval, Duration::from_secs(15));
    assert_eq!(
        c.backends.otlp.unwrap().remote.endpoint,
        "http://127.0.0.1:4317"
    );
    assert_eq!(
        c.metadata.static_labels.get("team").map(String::as_str),
        Some("core")
    );
    assert_eq!(
        c.metadata.static_labels.get("env").map(String::as_str),
        Some("prod")
    );
}

#[test]
fn bearer_token_from_env_becomes_a_header() {
    let args = RunArgs {
        otlp_endpoint: Some("https://otlp.example.com".into()),
        ..Default::default()
    };
    let env = |k: &str| (k == DEFAULT_TOKEN_ENV).then(|| "s3cret".to_owned());
    let c = DaemonConfig::merge(None, &args, &env).unwrap();
    let headers = c.backends.otlp.unwrap().remote.headers;
    assert!(
        headers.contains(&("authorization".into(), "Bearer s3cret".into())),
        "{headers:?}"
    );
}

#[test]
fn no_endpoint_means_local_directory() {
    let c = DaemonConfig::merge(None, &RunArgs::default(), &|_| None).unwrap();
    assert!(c.backends.is_empty());
    assert_eq!(c.data_dir, PathBuf::from("./sonde-data"));
    let c = DaemonConfig::merge(None, &RunArgs::default(), &|k| {
        (k == "INVOCATION_ID").then(|| "x".into())
    })
    .unwrap();
    assert_eq!(c.data_dir, PathBuf::from("/var/lib/sonde"));
}

#[test]
fn bad_label_flag_is_named() {
    let args = RunArgs {
        labels: vec!["novalue".into()],
        ..Default::default()
    };
    let err = DaemonConfig::merge(None, &args, &|_| None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("--label") && err.contains("KEY=VALUE"),
        "{err}"
    );
}

#[test]
fn otlp_header_flags_win_over_the_file_and_client_certificates_are_read() {
    let args = RunArgs {
        otlp_headers: vec!["X-Scope-OrgID=team-b".into()],
        ..Default::default()
    };
    let text = "[otlp]\nendpoint = \"https://otlp:4317\"\nheaders = { \"X-Scope-OrgID\" = \"team-a\" }\n\
                    client_cert_file = \"/c.pem\"\nclient_key_file = \"/k.pem\"\n";
    let c = DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), &args, &|_| None)
        .unwrap()
        .backends
        .otlp
        .unwrap()
        .remote;
    assert!(
        c.headers
            .iter()
            .any(|(k, v)| k.eq_ignore_ascii_case("x-scope-orgid") && v == "team-b"),
        "{:?}",
        c.headers
    );
    assert_eq!(c.client_cert_file, Some(PathBuf::from("/c.pem")));
    assert_eq!(c.client_key_file, Some(PathBuf::from("/k.pem")));
    let bad = RunArgs {
        otlp_headers: vec!["novalue".into()],
        ..Default::default()
    };
    let err = DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), &bad, &|_| None);
    assert!(err.unwrap_err().to_string().contains("--otlp-header"));
}

#[test]
fn pyroscope_and_parca_sections_take_their_own_keys() {
    let text = "[pyroscope]\nendpoint = \"https://profiles.example.com\"\ntenant_id = \"team-a\"\n\
                    basic_auth_user = \"123456\"\nprotocol = \"grpc\"\n\
                    [parca]\nendpoint = \"http://parca:7070\"\n";
    let env = |k: &str| (k == "SONDE_PYROSCOPE_PASSWORD").then(|| "glc_secret".to_owned());
    let c = DaemonConfig::merge(
        Some((Path::new("sonde.toml"), text)),
        &RunArgs::default(),
        &env,
    )
    .unwrap();
    let p = c.backends.pyroscope.unwrap();
    assert_eq!(p.protocol, crate::export::pyroscope::PushProtocol::Grpc);
    let header = |name: &str| {
        p.remote
            .headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    assert_eq!(header("x-scope-orgid").as_deref(), Some("team-a"));
    // base64("123456:glc_secret")
    assert_eq!(
        header("authorization").as_deref(),
        Some("Basic MTIzNDU2OmdsY19zZWNyZXQ=")
    );
    assert_eq!(
        c.backends.parca.unwrap().remote.endpoint,
        "http://parca:7070"
    );
    assert!(c.backends.otlp.is_none());
    // A key of another section is refused by name.
    let bad = "[parca]\nendpoint = \"http://parca:7070\"\ncompression = \"zstd\"\n";
    let err = merge(bad, &RunArgs::default()).unwrap_err().to_string();
    assert!(err.contains("parca.compression"), "{err}");
    // The protocol flag wins over the file.
    let args = RunArgs {
        pyroscope_endpoint: Some("http://pyroscope:4040".into()),
        pyroscope_protocol: Some(crate::export::pyroscope::PushProtocol::Connect),
        ..Default::default()
    };
    let c = DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), &args, &env).unwrap();
    let p = c.backends.pyroscope.unwrap();
    assert_eq!(p.remote.endpoint, "http://pyroscope:4040");
    assert_eq!(p.protocol, crate::export::pyroscope::PushProtocol::Connect);
}

/// The DaemonSet's example rules (commented out in its config map) parse and do what they say.
#[test]
fn the_daemonset_relabel_example_keeps_two_namespaces_and_maps_pod_labels() {
    let shipped = include_str!("../../../deploy/kubernetes/sonde.toml");
    let rules: String = shipped
        .lines()
        .skip_while(|l| !l.starts_with("# [[relabel]]"))
        .map(|l| format!("{}\n", l.trim_start_matches("# ")))
        .collect();
    assert!(rules.matches("[[relabel]]").count() >= 4, "{rules}");
    let c = merge(&rules, &RunArgs::default()).unwrap();
    let pod = |ns: &str| -> crate::metadata::relabel::Labels {
        [
            ("__meta_kubernetes_namespace", ns),
            ("__meta_kubernetes_pod_label_team", "cards"),
            ("__meta_kubernetes_pod_label_app_kubernetes_io_name", "api"),
            ("__meta_kubernetes_pod_label_workload_class", "batch"),
            ("__meta_process_comm", "api"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
    };
    let kept = c.relabel.apply(pod("payments")).expect("payments is kept");
    assert_eq!(kept["namespace"], "payments");
    assert_eq!(kept["team"], "cards");
    assert_eq!(kept["app_name"], "api");
    assert_eq!(kept["__sample_rate__"], "19");
    assert!(c.relabel.apply(pod("checkout")).is_some());
    assert!(c.relabel.apply(pod("kube-system")).is_none());
}

#[test]
fn a_bad_relabel_rule_names_its_index_and_reason() {
    let text = "[[relabel]]\naction = \"keep\"\n[[relabel]]\naction = \"hashmod\"\ntarget_label = \"shard\"\n";
    let err = merge(text, &RunArgs::default()).unwrap_err().to_string();
    assert!(
        err.contains("relabel rule 1") && err.contains("modulus"),
        "{err}"
    );
}

#[test]
fn relabel_rules_from_a_yaml_file_but_not_from_both() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("rules.yaml");
    std::fs::write(
        &path,
        "relabel_configs:\n  - source_labels: [__meta_process_comm]\n    regex: nginx\n    action: drop\n",
    )
    .unwrap();
    let args = RunArgs {
        relabel_file: Some(path.clone()),
        ..Default::default()
    };
    let c = merge("", &args).unwrap();
    let comm = |v: &str| -> crate::metadata::relabel::Labels {
        [("__meta_process_comm".to_owned(), v.to_owned())].into()
    };
    assert!(c.relabel.apply(comm("nginx")).is_none());
    assert!(c.relabel.apply(comm("api")).is_some());
    let key = format!("relabel_file = {:?}\n", path.to_str().unwrap());
    assert!(merge(&key, &RunArgs::default()).is_ok());
    let err = merge("[[relabel]]\naction = \"keep\"\n", &args)
        .unwrap_err()
        .to_string();
    assert!(err.contains("one place"), "{err}");
    std::fs::write(&path, "- action: [1]\n").unwrap();
    let err = merge("", &args).unwrap_err().to_string();
    assert!(err.contains("relabel_file"), "{err}");
}
