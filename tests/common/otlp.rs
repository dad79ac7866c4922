//! Helpers shared by the export tests (included as `common` by each export_*.rs): a synthetic profile built from the model types, and an in-process
//! tonic OTLP receiver on 127.0.0.1 with scripted answers.
#![allow(dead_code)]

use std::{
    collections::VecDeque,
    net::SocketAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use sonde::{
    export::Batch,
    metadata::Tags,
    profile::{
        Frame, FrameKind, Module, Profile, ProfileKind, StackSample, Symbol,
        otlp_proto::collector::{
            ExportProfilesPartialSuccess, ExportProfilesServiceRequest,
            ExportProfilesServiceResponse,
            profiles_service_server::{ProfilesService, ProfilesServiceServer},
        },
    },
};
use tonic::codec::CompressionEncoding;

/// Window start used by the synthetic batches.
pub const T0: i64 = 1_767_225_600_000_000_000;

fn frame(module: &Arc<Module>, address: u64, name: &str) -> Frame {
    Frame {
        address,
        kind: FrameKind::User,
        return_address: false,
        module: Some(module.clone()),
        symbols: Arc::from(vec![Symbol {
            name: name.to_owned(),
            file: Some("src/server.rs".into()),
            line: Some(42),
        }]),
    }
}

/// A cpu profile with two stacks: main -> handle_request -> compute_checksum (30 samples) and
/// main -> handle_request -> parse_headers (12 samples); values are (samples, cpu ns at 10 ms per sample).
pub fn synthetic_profile() -> Profile {
    let module = Arc::new(Module {
        path: "/usr/local/bin/cart".into(),
        build_id: Some("4f1a2b3c".into()),
        start: 0x40_0000,
        limit: 0x80_0000,
        file_offset: 0,
    });
    let main = frame(&module, 0x40_1000, "main");
    let handle = frame(&module, 0x40_2000, "handle_request");
    let checksum = frame(&module, 0x40_3000, "compute_checksum");
    let headers = frame(&module, 0x40_4000, "parse_headers");
    Profile {
        kind: ProfileKind::Cpu,
        time_nanos: T0,
        duration_nanos: 10_000_000_000,
        period: 10_000_000,
        samples: vec![
            StackSample {
                pid: 4242,
                tid: 4243,
                comm: "cart-worker".into(),
                frames: vec![checksum, handle.clone(), main.clone()],
                values: vec![30, 300_000_000],
                truncated: false,
                labels: Default::default(),
            },
            StackSample {
                pid: 4242,
                tid: 4244,
                comm: "cart-worker".into(),
                frames: vec![headers, handle, main],
                values: vec![12, 120_000_000],
                truncated: false,
                labels: Default::default(),
            },
        ],
        notes: Vec::new(),
    }
}

/// Tags of the synthetic workload: host.name, service identity and a static label.
pub fn synthetic_tags(service: &str) -> Tags {
    [
        ("host.name", "node-1"),
        ("service.name", service),
        ("service.version", "1.4.2"),
        ("team", "core"),
    ]
    .into_iter()
    .collect()
}

/// A one-window batch with one profile of `service`, starting `window` windows after [`T0`].
pub fn batch(service: &str, window: i64) -> Batch {
    let start = T0 + window * 10_000_000_000;
    let mut profile = synthetic_profile();
    profile.time_nanos = start;
    Batch {
        start_unix_nanos: start,
        end_unix_nanos: start + 10_000_000_000,
        profiles: vec![(synthetic_tags(service).into(), profile)],
        ..Default::default()
    }
}

/// What the receiver does with the next call.
#[derive(Clone, Copy, Debug)]
pub enum Answer {
    Ok,
    /// Accept, but report this many profiles rejected (partial success).
    Partial(i64),
    Fail(tonic::Code),
}

/// Shared state of the in-process receiver.
#[derive(Default)]
pub struct Received {
    /// Every call, accepted or not.
    pub calls: Mutex<u32>,
    /// Accepted requests.
    pub requests: Mutex<Vec<ExportProfilesServiceRequest>>,
    /// Scripted answers; `Ok` once empty.
    pub script: Mutex<VecDeque<Answer>>,
    /// Answer every call with this when set.
    pub always: Mutex<Option<tonic::Code>>,
}

impl Received {
    pub fn calls(&self) -> u32 {
        *self.calls.lock().unwrap()
    }
    pub fn requests(&self) -> Vec<ExportProfilesServiceRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[derive(Clone)]
struct Receiver(Arc<Received>);

#[tonic::async_trait]
impl ProfilesService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, tonic::Status> {
        *self.0.calls.lock().unwrap() += 1;
        if let Some(code) = *self.0.always.lock().unwrap() {
            return Err(tonic::Status::new(code, "scripted failure"));
        }
        let answer = self
            .0
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(Answer::Ok);
        match answer {
            Answer::Ok => {
                self.0.requests.lock().unwrap().push(request.into_inner());
                Ok(tonic::Response::new(
                    ExportProfilesServiceResponse::default(),
                ))
            }
            Answer::Partial(rejected) => {
                self.0.requests.lock().unwrap().push(request.into_inner());
                Ok(tonic::Response::new(ExportProfilesServiceResponse {
                    partial_success: Some(ExportProfilesPartialSuccess {
                        rejected_profiles: rejected,
                        error_message: "profile too old".into(),
                    }),
                }))
            }
            Answer::Fail(code) => Err(tonic::Status::new(code, "scripted failure")),
        }
    }
}

/// Starts a receiver on `addr` (port 0 for any) and returns its address and state.
pub async fn start_receiver(addr: SocketAddr, state: Arc<Received>) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .expect("bind the test receiver on loopback");
    let local = listener.local_addr().unwrap();
    let service = ProfilesServiceServer::new(Receiver(state))
        .accept_compressed(CompressionEncoding::Gzip)
        .accept_compressed(CompressionEncoding::Zstd);
    tokio::spawn(async move {
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(tonic::transport::server::TcpIncoming::from(listener))
            .await
            .expect("test receiver failed");
    });
    local
}

/// A loopback port that was free a moment ago.
pub fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A fast retry policy for tests.
pub fn fast_retry() -> sonde::export::retry::RetryPolicy {
    sonde::export::retry::RetryPolicy {
        initial: Duration::from_millis(100),
        max: Duration::from_millis(400),
        multiplier: 2.0,
        max_elapsed: Duration::from_secs(20),
    }
}

/// Function names (outermost function of each location) of every sample of every profile in `request`,
/// resolved through the request's dictionary, leaf first.
pub fn stacks(request: &ExportProfilesServiceRequest) -> Vec<Vec<String>> {
    let d = request
        .dictionary
        .as_ref()
        .expect("request has a dictionary");
    let mut out = Vec::new();
    for rp in &request.resource_profiles {
        for sp in &rp.scope_profiles {
            for p in &sp.profiles {
                for s in &p.samples {
                    let stack = &d.stack_table[s.stack_index as usize];
                    out.push(
                        stack
                            .location_indices
                            .iter()
                            .map(|&li| {
                                let loc = &d.location_table[li as usize];
                                let f = &d.function_table
                                    [loc.lines.last().unwrap().function_index as usize];
                                d.string_table[f.name_strindex as usize].clone()
                            })
                            .collect(),
                    );
                }
            }
        }
    }
    out
}
