//! The OTLP sink sends a synthetic profile to an in-process tonic receiver on 127.0.0.1; the receiver decodes
//! the request through its dictionary: function names, resource attributes (host.name, static labels) and
//! sample values must come back as built. Also: a small request limit splits a window into several requests
//! without losing or duplicating samples.

use crate::common::otlp as common;

use std::sync::Arc;

use sonde::{
    export::{
        ExportMetrics, Sink as _,
        otlp::{Compression, OtlpConfig, OtlpSink, encode},
    },
    profile::otlp_proto::common::any_value::Value,
};

#[tokio::test]
async fn receiver_decodes_functions_attributes_and_values() {
    let state = Arc::new(common::Received::default());
    let addr = common::start_receiver("127.0.0.1:0".parse().unwrap(), state.clone()).await;
    for compression in [Compression::Gzip, Compression::Zstd] {
        let mut config = OtlpConfig::new(format!("http://{addr}"));
        config.compression = compression;
        config
            .remote
            .headers
            .push(("x-scope-orgid".into(), "team-a".into()));
        let sink = OtlpSink::new(config, Arc::new(ExportMetrics::default())).unwrap();
        let outcome = sink
            .export(&common::batch("cart", 0))
            .await
            .expect("export succeeds");
        assert_eq!(outcome.requests, 1, "one window fits in one request");
    }
    let requests = state.requests();
    assert_eq!(requests.len(), 2, "one request per export, gzip and zstd");
    let request = &requests[0];
    assert_eq!(
        request.resource_profiles.len(),
        1,
        "one ResourceProfiles per workload identity"
    );
    let resource = request.resource_profiles[0].resource.as_ref().unwrap();
    let attr = |key: &str| {
        resource
            .attributes
            .iter()
            .find(|kv| kv.key == key)
            .and_then(|kv| kv.value.clone())
            .and_then(|v| v.value)
    };
    assert_eq!(attr("host.name"), Some(Value::StringValue("node-1".into())));
    assert_eq!(
        attr("service.name"),
        Some(Value::StringValue("cart".into()))
    );
    assert_eq!(
        attr("team"),
        Some(Value::StringValue("core".into())),
        "static label as a resource attribute"
    );

    let stacks = common::stacks(request);
    assert!(
        stacks.contains(&vec![
            "compute_checksum".into(),
            "handle_request".into(),
            "main".into()
        ]),
        "leaf-first stack through the dictionary: {stacks:?}"
    );
    let profiles = &request.resource_profiles[0].scope_profiles[0].profiles;
    assert_eq!(
        profiles.len(),
        2,
        "one OTLP profile per value type (samples, cpu)"
    );
    let d = request.dictionary.as_ref().unwrap();
    let type_name = |p: &sonde::profile::otlp_proto::profiles::Profile| {
        d.string_table[p.sample_type.as_ref().unwrap().type_strindex as usize].clone()
    };
    let cpu = profiles
        .iter()
        .find(|p| type_name(p) == "cpu")
        .expect("a cpu profile");
    let mut values: Vec<i64> = cpu.samples.iter().map(|s| s.values[0]).collect();
    values.sort();
    assert_eq!(values, vec![120_000_000, 300_000_000]);
    let samples = profiles
        .iter()
        .find(|p| type_name(p) == "samples")
        .expect("a samples profile");
    assert_eq!(samples.samples.iter().map(|s| s.values[0]).sum::<i64>(), 42);
    // Each sample says its thread: `thread.name` and `thread.id`, through the attribute table.
    let thread_ids: Vec<i64> = samples
        .samples
        .iter()
        .filter_map(|s| {
            s.attribute_indices.iter().find_map(|&i| {
                let kv = &d.attribute_table[i as usize];
                (d.string_table[kv.key_strindex as usize] == "thread.id").then(|| {
                    match kv.value.as_ref().and_then(|v| v.value.clone()) {
                        Some(Value::IntValue(n)) => n,
                        other => panic!("thread.id is not an integer: {other:?}"),
                    }
                })
            })
        })
        .collect();
    let mut thread_ids = thread_ids;
    thread_ids.sort_unstable();
    assert_eq!(thread_ids, [4243, 4244], "each sample's thread.id");
    // Shared dictionary: both profiles reuse the same two stacks (plus the zero entry).
    assert_eq!(
        d.stack_table.len(),
        3,
        "stacks deduplicated across profiles"
    );
    assert_eq!(d.string_table[0], "", "string_table[0] is the empty string");
}

#[test]
fn oversized_windows_are_split_without_losing_samples() {
    let mut batch = common::batch("cart", 0);
    // 40 workloads with 200 distinct stacks each.
    let template = batch.profiles[0].clone();
    batch.profiles.clear();
    for w in 0..40 {
        let (mut tags, mut profile) = template.clone();
        std::sync::Arc::make_mut(&mut tags).insert("service.name", format!("svc-{w}"));
        let base = profile.samples[0].clone();
        profile.samples = (0..200)
            .map(|i| {
                let mut s = base.clone();
                s.frames[0].address = 0x50_0000 + i;
                s.frames[0].symbols = Arc::from(vec![sonde::profile::Symbol {
                    name: format!("generated_function_with_a_long_name_{w}_{i}"),
                    file: None,
                    line: None,
                }]);
                s
            })
            .collect();
        batch.profiles.push((tags, profile));
    }
    let limit = 64 * 1024;
    let requests = encode::encode_batch(&batch, limit);
    assert!(requests.len() > 1, "a window over the limit is split");
    for r in &requests {
        assert!(
            prost::Message::encoded_len(r) <= limit,
            "each request under the limit"
        );
    }
    let samples: usize = requests.iter().map(|r| common::stacks(r).len()).sum();
    assert_eq!(samples, 40 * 200 * 2, "every sample once per value type");
    let single = encode::encode_batch(&batch, encode::DEFAULT_MAX_REQUEST_BYTES);
    assert_eq!(single.len(), 1, "fits one request under the default 4 MiB");
}
