//! `sonde diff --pyroscope` and `--parca`: the seed profiles (a 7.3-point regression of
//! `scoring.normalizeWeights`) served by in-test queriers must diff exactly as the same profiles as files,
//! the queries must carry the selectors, profile type and time range as given, and a backend that is down,
//! fails, or has no samples for a selector must be an error naming what was asked of whom.

use std::{
    collections::HashMap,
    net::SocketAddr,
    process::Output,
    sync::{Arc, Mutex},
};

use prost::Message as _;
use sonde::remote::proto::{
    google::v1::Profile as PyroscopeProfile,
    parca::query::v1alpha1::{
        HasProfileDataRequest, HasProfileDataResponse, LabelsRequest, LabelsResponse,
        ProfileTypesRequest, ProfileTypesResponse, QueryRangeRequest, QueryRangeResponse,
        QueryRequest, QueryResponse, SeriesRequest, SeriesResponse, ShareProfileRequest,
        ShareProfileResponse, ValuesRequest, ValuesResponse,
        query_request::{Mode, Options, ReportType},
        query_response::Report,
        query_service_server::{QueryService, QueryServiceServer},
    },
    querier::v1::SelectMergeProfileRequest,
};

use crate::common::diff_fixtures::{self as fixtures, Kind, diff_json, gzip, profile, stack};

const BASE: &str = r#"{service_name="checkout",version="2.3"}"#;
const NEW: &str = r#"{service_name="checkout",version="2.4"}"#;
/// Matches nothing: the queriers answer it with a profile without samples, as the real ones do.
const GONE: &str = r#"{service_name="gone"}"#;
/// Refused by the fake Pyroscope with a Connect error.
const BROKEN: &str = r#"{service_name="checkout""#;
const SINCE: &str = "2026-01-01T00:00:00Z";
const UNTIL: &str = "2026-01-01T01:00:00Z";
const START_MS: i64 = 1_767_225_600_000;
const END_MS: i64 = 1_767_229_200_000;
const PARCA_TYPE: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta";

/// The seed article's table: `(function, v2.3 samples, v2.4 samples)`, ten `work.stepN` filling the rest.
const TABLE: &[(&str, i64, i64)] = &[
    ("scoring.score;scoring.normalizeWeights", 210, 4_700),
    ("json.serialize", 1_520, 7_500),
    ("auth.verifyToken", 1_040, 5_050),
    ("log.write", 530, 2_700),
];

/// The v2.3 (`new == false`) or v2.4 capture, encoded.
fn seed(new: bool) -> Vec<u8> {
    let pick = |base: i64, later: i64| if new { later } else { base };
    let mut stacks: Vec<_> = TABLE
        .iter()
        .map(|&(f, b, n)| stack(&format!("main;server.handle;{f}"), pick(b, n)))
        .collect();
    stacks.push(stack("runtime.gcBgMarkWorker;(gc)", pick(400, 3_900)));
    for i in 0..10 {
        stacks.push(stack(
            &format!("main;server.handle;work.step{i}"),
            pick(630, 2_615),
        ));
    }
    let duration = if new { 500.0 } else { 100.0 };
    profile(Kind::Cpu, duration, &stacks).encode_to_vec()
}

/// What the queriers answer, by selector (Pyroscope) or query (Parca), and what they were asked.
#[derive(Default)]
struct Fake {
    answers: HashMap<String, Vec<u8>>,
    pyroscope: Mutex<Vec<(SelectMergeProfileRequest, HashMap<String, String>)>>,
    parca: Mutex<Vec<QueryRequest>>,
}

impl Fake {
    fn new(key: impl Fn(&str) -> String) -> Arc<Self> {
        // The empty answer keeps its sample types, as a real querier's does.
        let empty = profile(Kind::Cpu, 0.0, &[]);
        let answers = [
            (BASE, seed(false)),
            (NEW, seed(true)),
            (GONE, empty.encode_to_vec()),
        ];
        Arc::new(Fake {
            answers: answers
                .into_iter()
                .map(|(selector, bytes)| (key(selector), bytes))
                .collect(),
            ..Fake::default()
        })
    }
}

/// Pyroscope's querier as connect-go serves it on the HTTP port: one POST route, binary protobuf.
async fn fake_pyroscope(fake: Arc<Fake>) -> SocketAddr {
    use axum::{body::Bytes, http::HeaderMap, http::StatusCode, routing::post};
    let route = move |headers: HeaderMap, body: Bytes| async move {
        let request = SelectMergeProfileRequest::decode(body.as_ref()).expect("a request");
        let headers = headers
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned()))
            .collect();
        let answer = fake.answers.get(&request.label_selector).cloned();
        fake.pyroscope.lock().unwrap().push((request, headers));
        match answer {
            // Re-encoded as Pyroscope's own copy of the pprof message, to prove the two agree.
            Some(bytes) => (
                StatusCode::OK,
                PyroscopeProfile::decode(bytes.as_slice())
                    .expect("google.v1.Profile decodes pprof")
                    .encode_to_vec(),
            ),
            None => (
                StatusCode::BAD_REQUEST,
                br#"{"code":"invalid_argument","message":"parse error: unexpected end of input"}"#
                    .to_vec(),
            ),
        }
    };
    let app =
        axum::Router::new().route("/querier.v1.QuerierService/SelectMergeProfile", post(route));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

#[derive(Clone)]
struct Parca(Arc<Fake>);

fn unimplemented<T>() -> Result<tonic::Response<T>, tonic::Status> {
    Err(tonic::Status::unimplemented("sonde diff sends Query"))
}

#[tonic::async_trait]
impl QueryService for Parca {
    async fn query(
        &self,
        request: tonic::Request<QueryRequest>,
    ) -> Result<tonic::Response<QueryResponse>, tonic::Status> {
        let request = request.into_inner();
        let Some(Options::Merge(merge)) = &request.options else {
            return Err(tonic::Status::invalid_argument("expected a merge query"));
        };
        let answer = self.0.answers.get(&merge.query).cloned();
        self.0.parca.lock().unwrap().push(request);
        let bytes = answer.ok_or_else(|| tonic::Status::invalid_argument("unknown query"))?;
        // Parca's pprof report is gzip-compressed.
        Ok(tonic::Response::new(QueryResponse {
            report: Some(Report::Pprof(gzip(&bytes))),
            ..QueryResponse::default()
        }))
    }

    async fn query_range(
        &self,
        _: tonic::Request<QueryRangeRequest>,
    ) -> Result<tonic::Response<QueryRangeResponse>, tonic::Status> {
        unimplemented()
    }

    async fn series(
        &self,
        _: tonic::Request<SeriesRequest>,
    ) -> Result<tonic::Response<SeriesResponse>, tonic::Status> {
        unimplemented()
    }

    async fn profile_types(
        &self,
        _: tonic::Request<ProfileTypesRequest>,
    ) -> Result<tonic::Response<ProfileTypesResponse>, tonic::Status> {
        unimplemented()
    }

    async fn labels(
        &self,
        _: tonic::Request<LabelsRequest>,
    ) -> Result<tonic::Response<LabelsResponse>, tonic::Status> {
        unimplemented()
    }

    async fn values(
        &self,
        _: tonic::Request<ValuesRequest>,
    ) -> Result<tonic::Response<ValuesResponse>, tonic::Status> {
        unimplemented()
    }

    async fn share_profile(
        &self,
        _: tonic::Request<ShareProfileRequest>,
    ) -> Result<tonic::Response<ShareProfileResponse>, tonic::Status> {
        unimplemented()
    }

    async fn has_profile_data(
        &self,
        _: tonic::Request<HasProfileDataRequest>,
    ) -> Result<tonic::Response<HasProfileDataResponse>, tonic::Status> {
        unimplemented()
    }
}

async fn fake_parca(fake: Arc<Fake>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(QueryServiceServer::new(Parca(fake)))
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .unwrap();
    });
    addr
}

/// Runs `sonde diff` off the runtime, so the in-test server keeps answering meanwhile.
async fn sonde_diff(args: Vec<String>, env: &[(&str, &str)]) -> Output {
    let env: Vec<(String, String)> = env
        .iter()
        .map(|&(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    tokio::task::spawn_blocking(move || {
        std::process::Command::new(env!("CARGO_BIN_EXE_sonde"))
            .arg("diff")
            .args(&args)
            .env_remove("SONDE_PYROSCOPE_TOKEN")
            .env_remove("SONDE_PARCA_TOKEN")
            .envs(env)
            .output()
            .expect("running sonde")
    })
    .await
    .unwrap()
}

fn args(backend: &str, url: &str, base: &str, new: &str, extra: &[&str]) -> Vec<String> {
    let mut all = vec![backend, url, "--base", base, "--new", new];
    all.extend(extra);
    all.into_iter().map(str::to_owned).collect()
}

const WINDOW: &[&str] = &["--since", SINCE, "--until", UNTIL];

/// The diff of the seed profiles as gzip files, the reference every backend must match.
fn file_diff(name: &str, extra: &[&str]) -> serde_json::Value {
    let dir = fixtures::scratch(name);
    let (base, new) = (dir.join("v2.3.pb.gz"), dir.join("v2.4.pb.gz"));
    std::fs::write(&base, gzip(&seed(false))).unwrap();
    std::fs::write(&new, gzip(&seed(true))).unwrap();
    let mut all = vec![
        "--base".into(),
        base.into_os_string(),
        "--new".into(),
        new.into_os_string(),
    ];
    all.extend(extra.iter().map(Into::into));
    diff_json(all).0
}

fn json(out: &Output) -> serde_json::Value {
    assert!(
        out.status.success(),
        "sonde diff failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stdout is JSON")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test]
async fn pyroscope_sides_diff_as_the_same_profiles_as_files() {
    let fake = Fake::new(str::to_owned);
    let url = format!("http://{}", fake_pyroscope(fake.clone()).await);
    let mut extra = WINDOW.to_vec();
    extra.extend(["--tenant-id", "acme", "--format", "json"]);
    let out = sonde_diff(
        args("--pyroscope", &url, BASE, NEW, &extra),
        &[("SONDE_PYROSCOPE_TOKEN", "s3cret")],
    )
    .await;
    let remote = json(&out);
    let local = file_diff("backends_pyroscope", &[]);
    assert_eq!(remote["rows"], local["rows"], "{remote}");
    assert_eq!(remote["totals"], local["totals"]);
    assert_eq!(
        remote["rows"][0]["function"], "scoring.normalizeWeights",
        "{remote}"
    );

    let calls = fake.pyroscope.lock().unwrap();
    let mut selectors: Vec<_> = calls
        .iter()
        .map(|(r, _)| r.label_selector.as_str())
        .collect();
    selectors.sort_unstable();
    assert_eq!(selectors, [BASE, NEW], "selectors are sent verbatim");
    for (request, headers) in calls.iter() {
        assert_eq!(
            request.profile_type_id,
            "process_cpu:cpu:nanoseconds:cpu:nanoseconds"
        );
        assert_eq!((request.start, request.end), (START_MS, END_MS));
        assert_eq!(headers["x-scope-orgid"], "acme");
        assert_eq!(headers["authorization"], "Bearer s3cret");
        assert_eq!(headers["content-type"], "application/proto");
    }
}

#[tokio::test]
async fn pyroscope_sides_trip_the_release_gate_and_default_to_the_last_hour() {
    let fake = Fake::new(str::to_owned);
    let url = format!("http://{}", fake_pyroscope(fake.clone()).await);
    let extra = ["--fail-above", "5", "--profile-type", "cpu:x:y:z:w"];
    let out = sonde_diff(args("--pyroscope", &url, BASE, NEW, &extra), &[]).await;
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("scoring.normalizeWeights"),
        "{}",
        stderr(&out)
    );
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    for (request, headers) in fake.pyroscope.lock().unwrap().iter() {
        assert_eq!(request.profile_type_id, "cpu:x:y:z:w");
        assert_eq!(request.end - request.start, 3_600_000, "{request:?}");
        assert!((now_ms - request.end).abs() < 60_000, "{request:?}");
        assert!(!headers.contains_key("authorization") && !headers.contains_key("x-scope-orgid"));
    }
}

#[tokio::test]
async fn parca_sides_diff_as_the_same_profiles_as_files() {
    let fake = Fake::new(|selector| format!("{PARCA_TYPE}{selector}"));
    let url = format!("http://{}", fake_parca(fake.clone()).await);
    let mut extra = WINDOW.to_vec();
    extra.extend(["--format", "json"]);
    // One selector bare (typed by sonde), one with its type already: both reach Parca the same way.
    let typed_new = format!("{PARCA_TYPE}{NEW}");
    let out = sonde_diff(args("--parca", &url, BASE, &typed_new, &extra), &[]).await;
    let remote = json(&out);
    assert_eq!(
        remote["rows"],
        file_diff("backends_parca", &[])["rows"],
        "{remote}"
    );

    let calls = fake.parca.lock().unwrap();
    assert_eq!(calls.len(), 2);
    let mut queries = Vec::new();
    for request in calls.iter() {
        assert_eq!(request.mode, i32::from(Mode::Merge));
        assert_eq!(request.report_type, i32::from(ReportType::Pprof));
        let Some(Options::Merge(merge)) = &request.options else {
            panic!("not a merge: {request:?}");
        };
        let (start, end) = (merge.start.unwrap(), merge.end.unwrap());
        assert_eq!((start.seconds, start.nanos), (START_MS / 1000, 0));
        assert_eq!((end.seconds, end.nanos), (END_MS / 1000, 0));
        queries.push(merge.query.clone());
    }
    queries.sort_unstable();
    assert_eq!(queries, [format!("{PARCA_TYPE}{BASE}"), typed_new]);
}

#[tokio::test]
async fn a_selector_without_samples_is_an_error_naming_it() {
    let fake = Fake::new(str::to_owned);
    let pyroscope = format!("http://{}", fake_pyroscope(fake.clone()).await);
    let out = sonde_diff(args("--pyroscope", &pyroscope, BASE, GONE, WINDOW), &[]).await;
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(GONE) && text.contains("new selector") && text.contains(&pyroscope),
        "{text}"
    );
    assert!(
        text.contains("no process_cpu:cpu:nanoseconds:cpu:nanoseconds samples"),
        "{text}"
    );

    let out = sonde_diff(args("--pyroscope", &pyroscope, BROKEN, NEW, WINDOW), &[]).await;
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("base profile")
            && text.contains(BROKEN)
            && text.contains("unexpected end of input"),
        "the server's own message is shown: {text}"
    );

    let fake = Fake::new(|selector| format!("{PARCA_TYPE}{selector}"));
    let parca = format!("http://{}", fake_parca(fake).await);
    let out = sonde_diff(args("--parca", &parca, GONE, NEW, WINDOW), &[]).await;
    let text = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!("{PARCA_TYPE}{GONE}")) && text.contains("base selector"),
        "{text}"
    );
}

#[tokio::test]
async fn a_backend_that_is_down_is_an_error_naming_its_url() {
    // A port that was just free: nothing listens on it.
    let url = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    for backend in ["--pyroscope", "--parca"] {
        let out = sonde_diff(args(backend, &url, BASE, NEW, WINDOW), &[]).await;
        let text = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{backend}: {text}");
        assert!(
            text.contains(&url) && text.contains("cannot fetch") && text.contains("server up"),
            "{backend}: {text}"
        );
    }
}

#[tokio::test]
async fn backend_flags_are_checked_by_the_parser() {
    let run = |extra: &[&str]| {
        let mut all = vec!["--base", "a.pb.gz", "--new", "b.pb.gz"];
        all.extend(extra);
        sonde_diff(all.into_iter().map(str::to_owned).collect(), &[])
    };
    for extra in [
        &["--since", "now-1h"][..],
        &["--pyroscope", "http://x", "--parca", "http://y"],
        &["--pyroscope", "http://x", "--data", "/tmp"],
        &["--profile-type", "cpu"],
        &["--parca", "http://x", "--tenant-id", "acme"],
    ] {
        let out = run(extra).await;
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {}", stderr(&out));
    }
    let out = run(&[
        "--pyroscope",
        "http://x",
        "--since",
        "now",
        "--until",
        "now-1h",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("not before"), "{}", stderr(&out));
}
