//! TLS of the OTLP sink: the roots it trusts (the system's, plus `otlp.ca_file`), its client certificate
//! for mutual TLS (`otlp.client_cert_file` with `otlp.client_key_file`), and a failed handshake put in
//! words: which certificate was refused, by which side, and what to change.
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

use super::OtlpConfig;

/// Why TLS could not be set up or was refused.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A certificate or key file could not be read.
    #[error(
        "cannot read the {what} {path} (`otlp.{key}`): check the path and that sonde may read it"
    )]
    Read {
        /// What the file should hold.
        what: &'static str,
        /// The configuration key that names it.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// A file holds no PEM block of the expected kind.
    #[error(
        "{path} (`otlp.{key}`) holds no PEM {what} (no `-----BEGIN ...{marker}-----` line): give the PEM \
         file, or convert a DER one with `openssl {convert} -inform der -in FILE -out FILE.pem`"
    )]
    NotPem {
        /// What the file should hold.
        what: &'static str,
        /// The configuration key that names it.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// The end of the PEM label looked for.
        marker: &'static str,
        /// The openssl command that converts it.
        convert: &'static str,
    },
    /// Only one of the client certificate and its key was given.
    #[error(
        "`otlp.client_cert_file` and `otlp.client_key_file` go together: set both for mutual TLS, or neither"
    )]
    HalfIdentity,
    /// The TLS handshake with the endpoint failed.
    #[error("TLS with {endpoint} failed: {problem}; {hint}")]
    Handshake {
        /// The endpoint.
        endpoint: String,
        /// What went wrong, in words, with rustls' name for it.
        problem: String,
        /// What to do.
        hint: &'static str,
    },
}

/// The client TLS settings of `config`: system roots, its CA file and its client certificate.
pub(super) fn client_config(config: &OtlpConfig) -> Result<ClientTlsConfig, TlsError> {
    let mut tls = ClientTlsConfig::new().with_native_roots();
    if let Some(ca) = &config.ca_file {
        let pem = read_pem(ca, "CA certificate", "ca_file", "CERTIFICATE", "x509")?;
        tls = tls.ca_certificate(Certificate::from_pem(pem));
    }
    match (&config.client_cert_file, &config.client_key_file) {
        (Some(cert), Some(key)) => {
            let cert = read_pem(
                cert,
                "client certificate",
                "client_cert_file",
                "CERTIFICATE",
                "x509",
            )?;
            let key = read_pem(key, "client key", "client_key_file", "PRIVATE KEY", "pkey")?;
            tls = tls.identity(Identity::from_pem(cert, key));
        }
        (None, None) => {}
        _ => return Err(TlsError::HalfIdentity),
    }
    Ok(tls)
}

/// Reads a PEM file and checks it holds a block whose label ends with `marker`, so a DER file or the
/// key given for the certificate is named here rather than as a parse error deep in rustls.
fn read_pem(
    path: &Path,
    what: &'static str,
    key: &'static str,
    marker: &'static str,
    convert: &'static str,
) -> Result<Vec<u8>, TlsError> {
    let pem = std::fs::read(path).map_err(|source| TlsError::Read {
        what,
        key,
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
pub(super) fn handshake_failure(endpoint: &str, status: &tonic::Status) -> Option<TlsError> {
    let source = status.source()?;
    let (problem, hint) = match rustls_error(source) {
        Some(err) => describe(err),
        None => describe_alert(&received_alert(source)?),
    };
    Some(TlsError::Handshake {
        endpoint: endpoint.to_owned(),
        problem,
        hint,
    })
}

/// The rustls error in a chain of sources. `io::Error` hides the error it wraps from `source()` (it
/// returns that error's own source), so its payload is looked at too.
fn rustls_error<'a>(top: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(top);
    while let Some(err) = next {
        if let Some(found) = err.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(inner) = err
            .downcast_ref::<io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(inner);
        }
        next = err.source();
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
    fn finds_rustls_errors_inside_io_errors() {
        let io = io::Error::new(
            io::ErrorKind::InvalidData,
            rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer),
        );
        let status = tonic::Status::from_error(Box::new(io));
        let err = handshake_failure("https://collector:4317", &status).expect("a TLS failure");
        let text = err.to_string();
        assert!(text.contains("https://collector:4317"), "{text}");
        assert!(text.contains("UnknownIssuer"), "{text}");
        assert!(text.contains("otlp.ca_file"), "{text}");
        let other = tonic::Status::unavailable("connection refused");
        assert!(handshake_failure("https://collector:4317", &other).is_none());
    }

    #[test]
    fn alerts_known_only_by_their_message_are_named() {
        // What h2 hands over after a TLS 1.3 server refused the client: kind and message only.
        let io = io::Error::new(
            io::ErrorKind::InvalidData,
            "received fatal alert: CertificateRequired",
        );
        let status = tonic::Status::from_error(Box::new(io));
        let text = handshake_failure("https://c:4317", &status)
            .unwrap()
            .to_string();
        assert!(text.contains("requires a client certificate"), "{text}");
        assert!(text.contains("otlp.client_cert_file"), "{text}");
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
        let read = |p: &Path, marker| read_pem(p, "CA certificate", "ca_file", marker, "x509");
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
