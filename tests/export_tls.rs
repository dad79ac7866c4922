//! The OTLP sink over TLS against an in-process tonic receiver, with a CA, server and client certificates
//! made by the test (rcgen): a trusted CA works and the bearer token and tenant header arrive; an
//! untrusted CA, a certificate for another name, a missing or untrusted client certificate each fail at
//! once with an error naming the certificate problem and the setting to change.

use crate::common::certs::{Ca, Leaf, assert_tls_failure, pem_dir, save};
use crate::common::otlp as common;

use std::{
    net::SocketAddr,
    path::PathBuf,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use rcgen::ExtendedKeyUsagePurpose;
use sonde::{
    export::{
        ExportError, ExportMetrics, Sink as _,
        otlp::{OtlpConfig, OtlpSink},
    },
    profile::otlp_proto::collector::{
        ExportProfilesServiceRequest, ExportProfilesServiceResponse,
        profiles_service_server::{ProfilesService, ProfilesServiceServer},
    },
};
use tonic::{
    codec::CompressionEncoding,
    transport::{Certificate, Identity, Server, ServerTlsConfig, server::TcpIncoming},
};

/// The receiver's view of one call.
#[derive(Clone, Debug)]
struct Call {
    authorization: Option<String>,
    tenant: Option<String>,
    /// DER of the client certificate the TLS layer verified, if any.
    client_cert: Option<Vec<u8>>,
    request: ExportProfilesServiceRequest,
}

#[derive(Clone, Default)]
struct Receiver(Arc<Mutex<Vec<Call>>>);

#[tonic::async_trait]
impl ProfilesService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportProfilesServiceRequest>,
    ) -> Result<tonic::Response<ExportProfilesServiceResponse>, tonic::Status> {
        let header = |name| {
            request
                .metadata()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let call = Call {
            authorization: header("authorization"),
            tenant: header("x-scope-orgid"),
            client_cert: request
                .peer_certs()
                .and_then(|certs| certs.first().map(|c| c.to_vec())),
            request: request.get_ref().clone(),
        };
        self.0.lock().unwrap().push(call);
        Ok(tonic::Response::new(
            ExportProfilesServiceResponse::default(),
        ))
    }
}

/// Starts a TLS receiver on loopback with `server`'s certificate; with `client_ca`, it demands client certificates
/// signed by it.
async fn start_tls_receiver(server: &Leaf, client_ca: Option<&Ca>) -> (SocketAddr, Receiver) {
    let mut tls = ServerTlsConfig::new().identity(Identity::from_pem(&server.cert, &server.key));
    if let Some(ca) = client_ca {
        tls = tls
            .client_ca_root(Certificate::from_pem(&ca.pem))
            .client_auth_optional(false);
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let receiver = Receiver::default();
    let service =
        ProfilesServiceServer::new(receiver.clone()).accept_compressed(CompressionEncoding::Gzip);
    let router = Server::builder()
        .tls_config(tls)
        .expect("server TLS settings")
        .add_service(service);
    tokio::spawn(async move {
        router
            .serve_with_incoming(TcpIncoming::from(listener))
            .await
            .expect("test receiver failed");
    });
    (addr, receiver)
}

/// The sink's settings for `https://<host>:<port>`, trusting `ca_file`, with the token and tenant headers.
fn config(host: &str, addr: SocketAddr, ca_file: Option<PathBuf>) -> OtlpConfig {
    let mut config = OtlpConfig::new(format!("https://{host}:{}", addr.port()));
    config.remote.ca_file = ca_file;
    config.remote.headers = vec![
        ("authorization".into(), "Bearer s3cret-token".into()),
        ("X-Scope-OrgID".into(), "team-a".into()),
    ];
    config.retry = common::fast_retry();
    config.remote.timeout = Duration::from_secs(5);
    config
}

/// Exports one batch; returns the result and how long it took.
async fn export(config: OtlpConfig) -> (Result<(), ExportError>, Duration) {
    let sink = OtlpSink::new(config, Arc::new(ExportMetrics::default())).expect("sink settings");
    let started = Instant::now();
    let result = sink.export(&common::batch("cart", 0)).await.map(|_| ());
    (result, started.elapsed())
}

#[tokio::test]
async fn https_with_the_ca_trusted_delivers_token_and_tenant() {
    let dir = pem_dir("trusted");
    let ca = Ca::new("sonde test CA");
    let server = ca.leaf(
        &["localhost", "127.0.0.1"],
        ExtendedKeyUsagePurpose::ServerAuth,
    );
    let (addr, receiver) = start_tls_receiver(&server, None).await;
    let ca_file = save(&dir, "ca.pem", &ca.pem);
    let (result, _) = export(config("127.0.0.1", addr, Some(ca_file))).await;
    result.expect("export over TLS with the CA trusted");
    let calls = receiver.0.lock().unwrap().clone();
    assert_eq!(calls.len(), 1, "one request");
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some("Bearer s3cret-token")
    );
    assert_eq!(calls[0].tenant.as_deref(), Some("team-a"));
    assert_eq!(
        calls[0].client_cert, None,
        "no client certificate was asked for"
    );
    let stacks = common::stacks(&calls[0].request);
    for leaf in ["compute_checksum", "parse_headers"] {
        let stack = [leaf, "handle_request", "main"].map(String::from).to_vec();
        assert!(
            stacks.contains(&stack),
            "the stack of {leaf} arrived: {stacks:?}"
        );
    }
}

#[tokio::test]
async fn an_untrusted_ca_fails_naming_the_unknown_issuer() {
    let dir = pem_dir("untrusted");
    let ca = Ca::new("server CA");
    let other = Ca::new("some other CA");
    let server = ca.leaf(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let (addr, receiver) = start_tls_receiver(&server, None).await;
    let endpoint = format!("https://127.0.0.1:{}", addr.port());
    let expected = [
        endpoint.as_str(),
        "signed by a CA sonde does not trust (UnknownIssuer)",
        "set otlp.ca_file",
    ];
    // Another CA in otlp.ca_file, then the system roots alone.
    let wrong = save(&dir, "other-ca.pem", &other.pem);
    assert_tls_failure(
        export(config("127.0.0.1", addr, Some(wrong))).await,
        &expected,
    );
    assert_tls_failure(export(config("127.0.0.1", addr, None)).await, &expected);
    assert!(
        receiver.0.lock().unwrap().is_empty(),
        "nothing was delivered"
    );
}

#[tokio::test]
async fn a_certificate_for_another_name_fails_naming_it() {
    let dir = pem_dir("wrong_name");
    let ca = Ca::new("sonde test CA");
    let server = ca.leaf(&["collector.example"], ExtendedKeyUsagePurpose::ServerAuth);
    let (addr, _) = start_tls_receiver(&server, None).await;
    let ca_file = save(&dir, "ca.pem", &ca.pem);
    assert_tls_failure(
        export(config("127.0.0.1", addr, Some(ca_file))).await,
        &["does not name the endpoint's host (NotValidForName)"],
    );
}

#[tokio::test]
async fn mutual_tls_with_the_client_certificate_from_the_config() {
    let dir = pem_dir("mtls");
    let ca = Ca::new("sonde test CA");
    let server = ca.leaf(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let client = ca.leaf(&["sonde-agent"], ExtendedKeyUsagePurpose::ClientAuth);
    let (addr, receiver) = start_tls_receiver(&server, Some(&ca)).await;
    let mut config = config("127.0.0.1", addr, Some(save(&dir, "ca.pem", &ca.pem)));
    config.remote.client_cert_file = Some(save(&dir, "client.pem", &client.cert));
    config.remote.client_key_file = Some(save(&dir, "client-key.pem", &client.key));
    let (result, _) = export(config).await;
    result.expect("export with a client certificate the server trusts");
    let calls = receiver.0.lock().unwrap().clone();
    assert_eq!(calls.len(), 1);
    let presented = calls[0]
        .client_cert
        .as_ref()
        .expect("the server saw a client certificate");
    assert_eq!(
        presented, &client.der,
        "the certificate of otlp.client_cert_file"
    );
    assert_eq!(
        calls[0].authorization.as_deref(),
        Some("Bearer s3cret-token")
    );
    assert_eq!(calls[0].tenant.as_deref(), Some("team-a"));
}

#[tokio::test]
async fn mutual_tls_without_a_client_certificate_fails_clearly() {
    let dir = pem_dir("mtls_missing");
    let ca = Ca::new("sonde test CA");
    let server = ca.leaf(&["127.0.0.1"], ExtendedKeyUsagePurpose::ServerAuth);
    let (addr, receiver) = start_tls_receiver(&server, Some(&ca)).await;
    let ca_file = save(&dir, "ca.pem", &ca.pem);
    assert_tls_failure(
        export(config("127.0.0.1", addr, Some(ca_file.clone()))).await,
        &[
            "requires a client certificate (mutual TLS) and sonde sent none",
            "set otlp.client_cert_file and otlp.client_key_file",
        ],
    );
    // A client certificate from a CA the server does not trust is named as such.
    let rogue = Ca::new("rogue CA");
    let client = rogue.leaf(&["sonde-agent"], ExtendedKeyUsagePurpose::ClientAuth);
    let mut config = config("127.0.0.1", addr, Some(ca_file));
    config.remote.client_cert_file = Some(save(&dir, "rogue.pem", &client.cert));
    config.remote.client_key_file = Some(save(&dir, "rogue-key.pem", &client.key));
    assert_tls_failure(
        export(config).await,
        &[
            "the server rejected sonde's client certificate",
            "otlp.client_cert_file",
        ],
    );
    assert!(
        receiver.0.lock().unwrap().is_empty(),
        "nothing was delivered"
    );
}

#[tokio::test]
async fn client_certificate_settings_are_checked_at_start() {
    let dir = pem_dir("settings");
    let ca = Ca::new("sonde test CA");
    let client = ca.leaf(&["sonde-agent"], ExtendedKeyUsagePurpose::ClientAuth);
    let build = |cert: Option<PathBuf>, key: Option<PathBuf>| {
        let mut config = OtlpConfig::new("https://127.0.0.1:4317");
        config.remote.client_cert_file = cert;
        config.remote.client_key_file = key;
        OtlpSink::new(config, Arc::new(ExportMetrics::default()))
            .err()
            .map(|e| e.to_string())
    };
    let cert = save(&dir, "client.pem", &client.cert);
    let key = save(&dir, "client-key.pem", &client.key);
    let half = build(Some(cert.clone()), None).expect("a certificate without its key is refused");
    assert!(half.contains("go together"), "{half}");
    // The files swapped: the key file holds no certificate.
    let swapped = build(Some(key.clone()), Some(cert.clone())).expect("swapped files are refused");
    assert!(
        swapped.contains("client-key.pem") && swapped.contains("holds no PEM client certificate"),
        "{swapped}"
    );
    let missing = build(Some(dir.join("nope.pem")), Some(key)).expect("a missing file is refused");
    assert!(
        missing.contains("cannot read the client certificate"),
        "{missing}"
    );
    assert_eq!(
        build(Some(cert), Some(save(&dir, "k.pem", &client.key))),
        None
    );
}
