//! The Pyroscope sink's default protocol, Connect over HTTP/1.1, with TLS: an in-process HTTPS server
//! (tokio-rustls, hyper) with a CA, server and client certificates made by the test. A trusted CA with
//! a client certificate (mutual TLS) delivers the window with the tenant header; an untrusted CA fails
//! at once with an error naming the certificate problem and the `pyroscope.*` setting to change.

use crate::common::backends;
use crate::common::certs::{Ca, assert_tls_failure, pem_dir, save};
use crate::common::otlp as common;

use std::{net::SocketAddr, sync::Arc, time::Instant};

use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use prost::Message as _;
use rcgen::ExtendedKeyUsagePurpose;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject as _};
use sonde::{
    export::{
        ExportMetrics, Sink as _,
        pyroscope::{PyroscopeConfig, PyroscopeSink},
    },
    remote::proto::push::v1::{PushRequest, PushResponse},
};

/// An HTTPS Connect receiver of `push.v1.PusherService/Push` demanding a client certificate signed by
/// `client_ca`; records each request with the client certificate the TLS layer verified.
async fn start(server: &crate::common::certs::Leaf, client_ca: &Ca) -> (SocketAddr, Arc<Received>) {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(client_ca.pem.as_bytes()).unwrap())
        .unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let tls = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(
            vec![CertificateDer::from_pem_slice(server.cert.as_bytes()).unwrap()],
            PrivateKeyDer::from_pem_slice(server.key.as_bytes()).unwrap(),
        )
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(tls));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received = Arc::new(Received::default());
    let state = received.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                return;
            };
            let (acceptor, state) = (acceptor.clone(), state.clone());
            tokio::spawn(async move {
                // A refused handshake is the client's failure to see; the server just drops it.
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let client_cert = tls
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|c| c.first().map(|c| c.to_vec()));
                let service = hyper::service::service_fn(
                    move |req: hyper::Request<hyper::body::Incoming>| {
                        let (state, client_cert) = (state.clone(), client_cert.clone());
                        async move {
                            let tenant = req
                                .headers()
                                .get("x-scope-orgid")
                                .and_then(|v| v.to_str().ok())
                                .map(str::to_owned);
                            let path = req.uri().path().to_owned();
                            let body = req.into_body().collect().await?.to_bytes();
                            let push = PushRequest::decode(body.as_ref()).ok();
                            state.calls.lock().unwrap().push(Call {
                                path,
                                tenant,
                                client_cert,
                                push,
                            });
                            Ok::<_, hyper::Error>(hyper::Response::new(Full::new(Bytes::from(
                                PushResponse {}.encode_to_vec(),
                            ))))
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                    .await;
            });
        }
    });
    (addr, received)
}

struct Call {
    path: String,
    tenant: Option<String>,
    client_cert: Option<Vec<u8>>,
    push: Option<PushRequest>,
}

#[derive(Default)]
struct Received {
    calls: std::sync::Mutex<Vec<Call>>,
}

fn config(addr: SocketAddr) -> PyroscopeConfig {
    let mut config = PyroscopeConfig::new(format!("https://127.0.0.1:{}", addr.port()));
    config.remote.headers = vec![("X-Scope-OrgID".into(), "team-a".into())];
    config.retry = common::fast_retry();
    config
}

#[tokio::test]
async fn connect_over_mutual_tls_delivers_and_an_untrusted_ca_is_named() {
    let dir = pem_dir("pyroscope_connect");
    let ca = Ca::new("sonde test CA");
    let server = ca.leaf(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let client = ca.leaf(&["sonde-agent"], ExtendedKeyUsagePurpose::ClientAuth);
    let (addr, received) = start(&server, &ca).await;

    let mut trusted = config(addr);
    trusted.remote.ca_file = Some(save(&dir, "ca.pem", &ca.pem));
    trusted.remote.client_cert_file = Some(save(&dir, "client.pem", &client.cert));
    trusted.remote.client_key_file = Some(save(&dir, "client-key.pem", &client.key));
    let sink = PyroscopeSink::new(trusted, Arc::new(ExportMetrics::default())).unwrap();
    sink.export(&common::batch("cart", 0))
        .await
        .expect("a push over mutual TLS with the CA trusted");
    {
        let calls = received.calls.lock().unwrap();
        assert_eq!(calls.len(), 1, "one request");
        let call = &calls[0];
        assert_eq!(call.path, "/push.v1.PusherService/Push");
        assert_eq!(call.tenant.as_deref(), Some("team-a"));
        assert_eq!(
            call.client_cert.as_deref(),
            Some(client.der.as_slice()),
            "the certificate of pyroscope.client_cert_file"
        );
        let push = call
            .push
            .as_ref()
            .expect("the body decodes as a PushRequest");
        let series = &push.series[0];
        let labels: Vec<_> = series
            .labels
            .iter()
            .map(|l| (l.name.as_str(), l.value.as_str()))
            .collect();
        assert!(labels.contains(&("service_name", "cart")), "{labels:?}");
        let profile = backends::decode_raw(&series.samples[0].raw_profile);
        assert!(!profile.sample.is_empty(), "the window's samples arrived");
    }

    // The system roots alone do not know the test CA.
    let started = Instant::now();
    let untrusted = PyroscopeSink::new(config(addr), Arc::new(ExportMetrics::default())).unwrap();
    let result = untrusted
        .export(&common::batch("cart", 1))
        .await
        .map(|_| ());
    assert_tls_failure(
        (result, started.elapsed()),
        &[
            "signed by a CA sonde does not trust (UnknownIssuer)",
            "set pyroscope.ca_file",
        ],
    );
    assert_eq!(
        received.calls.lock().unwrap().len(),
        1,
        "nothing more was delivered"
    );
}
