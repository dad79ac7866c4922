//! TLS of a remote backend (OTLP, Pyroscope, Parca, the diff's queries): the roots it trusts (the
//! system's, plus `<section>.ca_file`), its client certificate for mutual TLS (`<section>.client_cert_file`
//! with `<section>.client_key_file`), and a failed handshake put in words: which certificate was refused,
//! by which side, and what to change. Built for tonic (gRPC) and as a rustls config for hyper (Connect).
//!
//! A handshake failure is not retried: a certificate does not become trusted by waiting, and retrying
//! would hide the reason behind "gave up after N attempts".

use std::{
    error::Error as StdError,
    io,
    path::{Path, PathBuf},
};

use rustls::CertificateError;
use tonic::transport::{Certificate, ClientTlsConfig, Identity};

use super::RemoteConfig;

/// Why TLS could not be set up or was refused.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read.
    #[error("cannot read the {what} {path} (`{key}`): check the path and that sonde may read it")]
    Read {
        /// What the file should hold.
        what: &'static str,
        /// The configuration key that names it.
        key: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file holds no PEM block of the expected kind.
    #[error(
        "{path} (`{key}`) holds no PEM {what} (no `-----BEGIN ...{marker}-----` line): give the PEM \
         file, or convert a DER one with `openssl {convert} -inform der -in FILE -out FILE.pem`"
    )]
    NotPem {
        /// What the file should hold.
        what: &'static str,
        /// The configuration key that names it.
        key: String,
        /// The file.
        path: PathBuf,
        /// The end of the PEM label looked for.
        marker: &'static str,
        /// The openssl command that converts it.
        convert: &'static str,
    },
    /// Only one of the client certificate and its key was given.
    #[error(
        "`{section}.client_cert_file` and `{section}.client_key_file` go together: set both for mutual TLS, or neither"
    )]
    HalfIdentity {
        /// The configuration section (`otlp`, `pyroscope`, `parca`).
        section: &'static str,
    },
    /// The TLS handshake with the endpoint failed.
    #[error("TLS with {endpoint} failed: {problem}; {hint}")]
    Handshake {
        /// The endpoint.
        endpoint: String,
        /// What went wrong, in words, with rustls' name for it.
        problem: String,
        /// What to do.
        hint: String,
    },
}

/// The client TLS settings of `config` for tonic: system roots, its CA file and its client certificate.
pub(crate) fn client_config(config: &RemoteConfig) -> Result<ClientTlsConfig, TlsError> {
    let mut tls = ClientTlsConfig::new().with_native_roots();
    let files = files(config)?;
    if let Some(ca) = files.ca {
        tls = tls.ca_certificate(Certificate::from_pem(ca));
    }
    if let Some((cert, key)) = files.identity {
        tls = tls.identity(Identity::from_pem(cert, key));
    }
    Ok(tls)
}

/// The same trust and identity as a rustls client config, for hyper (Pyroscope's Connect protocol).
pub(crate) fn rustls_config(config: &RemoteConfig) -> Result<rustls::ClientConfig, TlsError> {
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    let files = files(config)?;
    let invalid = |what: &str, err: String| TlsError::Handshake {
        endpoint: config.endpoint.clone(),
        problem: format!("{what}: {err}"),
        hint: format!(
            "check {}.ca_file, {0}.client_cert_file and {0}.client_key_file",
            config.section
        ),
    };
    let mut roots = rustls::RootCertStore::empty();
    // Roots the system store cannot parse are skipped, as tonic's native roots do.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(ca) = &files.ca {
        for cert in CertificateDer::pem_slice_iter(ca) {
            let cert = cert.map_err(|e| invalid("the CA file", e.to_string()))?;
            roots
                .add(cert)
                .map_err(|e| invalid("the CA file", e.to_string()))?;
        }
    }
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid("TLS versions", e.to_string()))?
        .with_root_certificates(roots);
    Ok(match files.identity {
        Some((cert, key)) => {
            let chain = CertificateDer::pem_slice_iter(&cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| invalid("the client certificate", e.to_string()))?;
            let key = PrivateKeyDer::from_pem_slice(&key)
                .map_err(|e| invalid("the client key", e.to_string()))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid("the client certificate", e.to_string()))?
        }
        None => builder.with_no_client_auth(),
    })
}

/// The PEM files of `config`, read and checked.
struct Files {
    ca: Option<Vec<u8>>,
    identity: Option<(Vec<u8>, Vec<u8>)>,
}

fn files(config: &RemoteConfig) -> Result<Files, TlsError> {
    let key = |name: &str| format!("{}.{name}", config.section);
    let ca = match &config.ca_file {
        Some(ca) => Some(read_pem(
            ca,
            "CA certificate",
            key("ca_file"),
            "CERTIFICATE",
            "x509",
        )?),
        None => None,
    };
    let identity = match (&config.client_cert_file, &config.client_key_file) {
        (Some(cert), Some(k)) => Some((
            read_pem(
                cert,
                "client certificate",
                key("client_cert_file"),
                "CERTIFICATE",
                "x509",
            )?,
            read_pem(
                k,
                "client key",
                key("client_key_file"),
                "PRIVATE KEY",
                "pkey",
            )?,
        )),
        (None, None) => None,
        _ => {
            return Err(TlsError::HalfIdentity {
                section: config.section,
            });
        }
    };
    Ok(Files { ca, identity })
}

/// Reads a PEM file and checks it holds a block whose label ends with `marker`, so a DER file or the
/// key given for the certificate is named here rather than as a parse error deep in rustls.
fn read_pem(
    path: &Path,
    what: &'static str,
    key: String,
    marker: &'static str,
    convert: &'static str,
) -> Result<Vec<u8>, TlsError> {
    let pem = std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        key: key.clone(),
        path: path.to_owned(),
        source,
    })?;
    let text = String::from_utf8_lossy(&pem);
    let has_block = text.lines().any(|l| {
        l.trim()
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
            .is_some_and(|label| label.ends_with(marker))
    });
    if !has_block {
        return Err(TlsError::NotPem {
            what,
            key,
            path: path.to_owned(),
            marker,
            convert,
        });
    }
    Ok(pem)
}

/// The TLS failure behind a failed call, put in words; None when the call failed for another reason.
/// `section` names the configuration keys of the hint.
pub(crate) fn handshake_failure(
    endpoint: &str,
    section: &str,
    status: &tonic::Status,
) -> Option<TlsError> {
    failure_in(endpoint, section, status.source()?)
}

/// The TLS failure in a chain of errors (a hyper client's), put in words.
pub(crate) fn failure_in(
    endpoint: &str,
    section: &str,
    source: &(dyn StdError + 'static),
) -> Option<TlsError> {
    let (problem, hint) = match rustls_error(source) {
        Some(err) => describe(err),
        None => describe_alert(&received_alert(source)?),
    };
    Some(TlsError::Handshake {
        endpoint: endpoint.to_owned(),
        problem,
        // The hints are written for the OTLP section; other sinks have the same keys.
        hint: hint.replace("otlp.", &format!("{section}.")),
    })
}

/// The rustls error in a chain of sources. `io::Error` hides the error it wraps from `source()` (it
/// returns that error's own source), so its payload is followed instead; hyper's connector wraps
/// tokio-rustls' `io::Error` in another one, so payloads can nest.
fn rustls_error<'a>(top: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(top);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        next = match err.downcast_ref::<io::Error>().and_then(|io| io.get_ref()) {
            Some(payload) => Some(payload as &(dyn StdError + 'static)),
            None => err.source(),
        };
    }
    None
}

/// The alert named in a chain of sources by rustls' message `received fatal alert: <name>`. An alert that
/// arrives after the handshake (TLS 1.3 servers refuse a client certificate then) reaches us through h2,
/// which keeps only the kind and message of the I/O error, not the rustls error itself.
fn received_alert(top: &(dyn StdError + 'static)) -> Option<String> {
    const PREFIX: &str = "received fatal alert: ";
    let mut next = Some(top);
    while let Some(err) = next {
        let found = err
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .map(|inner| inner.to_string())
            .filter(|text| text.starts_with(PREFIX));
        if let Some(text) = found {
            return Some(text[PREFIX.len()..].trim().to_owned());
        }
        next = err.source();
    }
    None
}

const CHECK_SETTINGS: &str = "check otlp.ca_file, otlp.client_cert_file and otlp.client_key_file against the server's TLS settings";

fn describe(err: &rustls::Error) -> (String, &'static str) {
    use rustls::Error as E;
    match err {
        E::InvalidCertificate(CertificateError::UnknownIssuer) => (
            "the server's certificate is signed by a CA sonde does not trust (UnknownIssuer)"
                .into(),
            "set otlp.ca_file to the PEM certificate of the CA that signed it",
        ),
        E::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => (
            "the server's certificate does not name the endpoint's host (NotValidForName)".into(),
            "use a host name or address listed in the certificate's subject alternative names, or reissue it",
        ),
        E::InvalidCertificate(
            CertificateError::Expired | CertificateError::ExpiredContext { .. },
        ) => (
            "the server's certificate has expired (Expired)".into(),
            "renew the server's certificate",
        ),
        E::InvalidCertificate(
            CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. },
        ) => (
            "the server's certificate is not valid yet (NotValidYet)".into(),
            "check the clocks of this host and of the CA",
        ),
        E::InvalidCertificate(other) => (
            format!("the server's certificate was rejected ({other:?})"),
            CHECK_SETTINGS,
        ),
        E::AlertReceived(alert) => describe_alert(&format!("{alert:?}")),
        other => (format!("{other}"), CHECK_SETTINGS),
    }
}

/// An alert the server sent, by its rustls name (`AlertDescription`'s variant).
fn describe_alert(name: &str) -> (String, &'static str) {
    match name {
        "CertificateRequired" => (
            "the server requires a client certificate (mutual TLS) and sonde sent none \
             (alert CertificateRequired)"
                .into(),
            "set otlp.client_cert_file and otlp.client_key_file to a certificate the server's CA signed",
        ),
        "BadCertificate"
        | "UnknownCA"
        | "CertificateUnknown"
        | "CertificateExpired"
        | "UnsupportedCertificate"
        | "AccessDenied"
        | "DecryptError" => (
            format!("the server rejected sonde's client certificate (alert {name})"),
            "use a client certificate signed by a CA the server trusts (otlp.client_cert_file)",
        ),
        _ => (
            format!("the server ended the handshake (alert {name})"),
            CHECK_SETTINGS,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_rustls_errors_inside_nested_io_errors() {
        // As hyper's HTTPS connector reports a refused certificate: io::Error(Other) around
        // tokio-rustls' io::Error(InvalidData) around the rustls error.
        let inner = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let outer = io::Error::other(inner);
        let err = failure_in("https://pyroscope:4040", "pyroscope", &outer).expect("a TLS failure");
        let text = err.to_string();
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(text.contains("pyroscope.ca_file"), "{text}");
    }

    #[test]
    fn finds_rustls_errors_inside_io_errors() {
        let io = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let status = tonic::Status::from_error(Box::new(io));
        let err =
            handshake_failure("https://collector:4317", "otlp", &status).expect("a TLS failure");
        let text = err.to_string();
        assert!(text.contains("https://collector:4317"), "{text}");
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(text.contains("otlp.ca_file"), "{text}");
        let other = tonic::Status::unavailable("connection refused");
        assert!(handshake_failure("https://collector:4317", "otlp", &other).is_none());
    }

    #[test]
    fn alerts_known_only_by_their_message_are_named() {
        // What h2 hands over after a TLS 1.3 server refused the client: kind and message only.
        let io = io::Error::new(
            io::ErrorKind::InvalidData,
            "received fatal alert: CertificateRequired",
        );
        let status = tonic::Status::from_error(Box::new(io));
        let text = handshake_failure("https://c:4317", "pyroscope", &status)
            .unwrap()
            .to_string();
        assert!(text.contains("requires a client certificate"), "{text}");
        assert!(text.contains("pyroscope.client_cert_file"), "{text}");
    }

    #[test]
    fn pem_files_are_checked_for_their_block() {
        let dir = std::env::temp_dir().join(format!("sonde-tls-pem-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, der) = (dir.join("cert.pem"), dir.join("cert.der"));
        std::fs::write(
            &cert,
            "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        )
        .unwrap();
        std::fs::write(&der, [0x30, 0x82, 0x01, 0x0a]).unwrap();
        let read =
            |p: &Path, marker| read_pem(p, "CA certificate", "otlp.ca_file".into(), marker, "x509");
        assert!(read(&cert, "CERTIFICATE").is_ok());
        let err = read(&der, "CERTIFICATE").unwrap_err().to_string();
        assert!(
            err.contains("holds no PEM CA certificate") && err.contains("openssl x509"),
            "{err}"
        );
        assert!(
            read(&cert, "PRIVATE KEY").is_err(),
            "a certificate is not a key"
        );
        assert!(matches!(
            read(&dir.join("missing.pem"), "CERTIFICATE"),
            Err(TlsError::Read { .. })
        ));
        std::fs::remove_dir_all(&dir).ok();
    }
}
