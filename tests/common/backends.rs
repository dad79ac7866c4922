//! In-process receivers of the backends' own protocols, built from their vendored `.proto` files
//! (`proto/pyroscope`, `proto/parca`): Pyroscope's push service over Connect (an axum HTTP/1.1 route,
//! as connect-go serves it) and over gRPC (tonic), and Parca's profile store over gRPC. Each keeps what
//! it accepted as (labels, decoded pprof) series.
#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    io::Read as _,
    net::SocketAddr,
    pin::Pin,
    sync::{Arc, Mutex},
};

use prost::Message as _;
use sonde::{
    profile::pprof::proto::Profile,
    remote::proto::{
        parca::profilestore::v1alpha1::{
            WriteArrowRequest, WriteArrowResponse, WriteRawRequest, WriteRawResponse, WriteRequest,
            WriteResponse,
            profile_store_service_server::{ProfileStoreService, ProfileStoreServiceServer},
        },
        push::v1::{
            PushRequest, PushResponse,
            pusher_service_server::{PusherService, PusherServiceServer},
        },
    },
};

/// One series as received: its labels in the order sent, the raw profile's id (Pyroscope) and the
/// decoded pprof.
#[derive(Clone, Debug)]
pub struct Series {
    pub labels: Vec<(String, String)>,
    pub id: String,
    pub profile: Profile,
}

impl Series {
    /// The value of label `name`.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every function name of the profile's samples.
    pub fn functions(&self) -> Vec<String> {
        let p = &self.profile;
        let name_of = |id: u64| {
            p.function
                .iter()
                .find(|f| f.id == id)
                .map(|f| p.string_table[f.name as usize].clone())
        };
        p.sample
            .iter()
            .flat_map(|s| &s.location_id)
            .filter_map(|id| p.location.iter().find(|l| l.id == *id))
            .flat_map(|l| &l.line)
            .filter_map(|line| name_of(line.function_id))
            .collect()
    }

    /// The pprof's sample types (`type/unit`).
    pub fn sample_types(&self) -> Vec<String> {
        let s = &self.profile.string_table;
        self.profile
            .sample_type
            .iter()
            .map(|t| format!("{}/{}", s[t.r#type as usize], s[t.unit as usize]))
            .collect()
    }
}

/// What a receiver accepted, and how many calls it answered.
#[derive(Debug, Default)]
pub struct Received {
    pub series: Mutex<Vec<Series>>,
    pub calls: Mutex<u32>,
    /// Header values seen on the calls (lowercased names), last call wins.
    pub headers: Mutex<BTreeMap<String, String>>,
}

impl Received {
    pub fn series(&self) -> Vec<Series> {
        self.series.lock().unwrap().clone()
    }
}

/// Gunzips and decodes a raw profile; panics with what is wrong (the test fails on a bad payload).
pub fn decode_raw(raw: &[u8]) -> Profile {
    assert!(
        raw.starts_with(&[0x1f, 0x8b]),
        "raw_profile must be gzip pprof"
    );
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(raw)
        .read_to_end(&mut bytes)
        .expect("raw_profile gunzips");
    Profile::decode(bytes.as_slice()).expect("raw_profile decodes as pprof")
}

fn keep_push(state: &Received, request: PushRequest) {
    let mut series = state.series.lock().unwrap();
    for s in request.series {
        let labels: Vec<_> = s.labels.into_iter().map(|l| (l.name, l.value)).collect();
        for sample in s.samples {
            series.push(Series {
                labels: labels.clone(),
                id: sample.id,
                profile: decode_raw(&sample.raw_profile),
            });
        }
    }
}

fn keep_headers(state: &Received, headers: impl Iterator<Item = (String, String)>) {
    let mut seen = state.headers.lock().unwrap();
    for (k, v) in headers {
        seen.insert(k.to_ascii_lowercase(), v);
    }
}

/// Pyroscope's push over the Connect protocol: `POST /push.v1.PusherService/Push`, binary protobuf.
pub async fn pyroscope_connect(addr: SocketAddr, state: Arc<Received>) -> SocketAddr {
    use axum::{body::Bytes, http::HeaderMap, http::StatusCode, routing::post};
    let route = move |headers: HeaderMap, body: Bytes| {
        let state = state.clone();
        async move {
            *state.calls.lock().unwrap() += 1;
            keep_headers(
                &state,
                headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_str().unwrap_or("").to_owned())),
            );
            if headers.get("content-type").and_then(|v| v.to_str().ok())
                != Some("application/proto")
            {
                return (
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    br#"{"code":"internal","message":"expected application/proto"}"#.to_vec(),
                );
            }
            match PushRequest::decode(body.as_ref()) {
                Ok(request) => {
                    keep_push(&state, request);
                    (StatusCode::OK, PushResponse {}.encode_to_vec())
                }
                Err(e) => (
                    StatusCode::BAD_REQUEST,
                    format!(r#"{{"code":"invalid_argument","message":"{e}"}}"#).into_bytes(),
                ),
            }
        }
    };
    let app = axum::Router::new().route("/push.v1.PusherService/Push", post(route));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind the Pyroscope Connect receiver on loopback");
    let local = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.expect("Connect receiver") });
    local
}

#[derive(Clone)]
struct Pusher(Arc<Received>);

#[tonic::async_trait]
impl PusherService for Pusher {
    async fn push(
        &self,
        request: tonic::Request<PushRequest>,
    ) -> Result<tonic::Response<PushResponse>, tonic::Status> {
        *self.0.calls.lock().unwrap() += 1;
        keep_headers(
            &self.0,
            request.metadata().iter().filter_map(|kv| match kv {
                tonic::metadata::KeyAndValueRef::Ascii(k, v) => {
                    Some((k.to_string(), v.to_str().unwrap_or("").to_owned()))
                }
                _ => None,
            }),
        );
        keep_push(&self.0, request.into_inner());
        Ok(tonic::Response::new(PushResponse {}))
    }
}

/// Pyroscope's push over gRPC (HTTP/2, h2c).
pub async fn pyroscope_grpc(addr: SocketAddr, state: Arc<Received>) -> SocketAddr {
    serve(addr, PusherServiceServer::new(Pusher(state))).await
}

#[derive(Clone)]
struct Store(Arc<Received>);

type Stream<T> = Pin<Box<dyn futures_util::Stream<Item = Result<T, tonic::Status>> + Send>>;

#[tonic::async_trait]
impl ProfileStoreService for Store {
    async fn write_raw(
        &self,
        request: tonic::Request<WriteRawRequest>,
    ) -> Result<tonic::Response<WriteRawResponse>, tonic::Status> {
        *self.0.calls.lock().unwrap() += 1;
        let request = request.into_inner();
        let mut series = self.0.series.lock().unwrap();
        for s in request.series {
            let labels: Vec<_> = s
                .labels
                .unwrap_or_default()
                .labels
                .into_iter()
                .map(|l| (l.name, l.value))
                .collect();
            for sample in s.samples {
                series.push(Series {
                    labels: labels.clone(),
                    id: String::new(),
                    profile: decode_raw(&sample.raw_profile),
                });
            }
        }
        Ok(tonic::Response::new(WriteRawResponse {}))
    }

    type WriteStream = Stream<WriteResponse>;

    async fn write(
        &self,
        _: tonic::Request<tonic::Streaming<WriteRequest>>,
    ) -> Result<tonic::Response<Self::WriteStream>, tonic::Status> {
        Err(tonic::Status::unimplemented("sonde sends WriteRaw"))
    }

    async fn write_arrow(
        &self,
        _: tonic::Request<WriteArrowRequest>,
    ) -> Result<tonic::Response<WriteArrowResponse>, tonic::Status> {
        Err(tonic::Status::unimplemented("sonde sends WriteRaw"))
    }
}

/// Parca's profile store over gRPC (HTTP/2, h2c).
pub async fn parca(addr: SocketAddr, state: Arc<Received>) -> SocketAddr {
    serve(addr, ProfileStoreServiceServer::new(Store(state))).await
}

async fn serve<S>(addr: SocketAddr, service: S) -> SocketAddr
where
    S: tonic::codegen::Service<
            axum::http::Request<tonic::body::Body>,
            Response = axum::http::Response<tonic::body::Body>,
            Error = std::convert::Infallible,
        > + tonic::server::NamedService
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind the gRPC receiver on loopback");
    let local = listener.local_addr().unwrap();
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .expect("gRPC receiver failed");
    });
    local
}

/// Asserts the label rules on every series: `__name__` and `service_name` present, every name valid
/// (`[a-zA-Z_][a-zA-Z0-9_]*`), none twice.
pub fn assert_valid_labels(series: &[Series]) {
    for s in series {
        let mut names: Vec<&str> = s.labels.iter().map(|(k, _)| k.as_str()).collect();
        assert!(s.label("__name__").is_some(), "no __name__: {:?}", s.labels);
        assert!(
            s.label("service_name").is_some(),
            "no service_name: {:?}",
            s.labels
        );
        for n in &names {
            let mut c = n.chars();
            let first = c.next().unwrap();
            assert!(
                (first.is_ascii_alphabetic() || first == '_')
                    && c.all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "invalid label name {n:?}"
            );
        }
        names.sort();
        let before = names.len();
        names.dedup();
        assert_eq!(before, names.len(), "a label name repeats: {:?}", s.labels);
    }
}
