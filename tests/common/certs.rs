//! Certificates for the TLS tests (rcgen): a CA per test, leaves it signs, their PEM files, and the
//! check that a TLS failure came at once and says what to change.
#![allow(dead_code)]

use std::{
    path::{Path, PathBuf},
    time::Duration,
};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, SanType,
};
use sonde::export::ExportError;

/// A CA that signs the certificates of one test.
pub struct Ca {
    pub pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    pub fn new(name: &str) -> Self {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let pem = params.self_signed(&key).unwrap().pem();
        Ca {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf certificate for `names` (DNS names or IP addresses).
    pub fn leaf(&self, names: &[&str], purpose: ExtendedKeyUsagePurpose) -> Leaf {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.subject_alt_names = names
            .iter()
            .map(|n| match n.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName((*n).try_into().unwrap()),
            })
            .collect();
        params.distinguished_name.push(DnType::CommonName, names[0]);
        params.extended_key_usages = vec![purpose];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
            der: cert.der().to_vec(),
        }
    }
}

/// A certificate (PEM and DER) and its private key (PEM).
pub struct Leaf {
    pub cert: String,
    pub key: String,
    pub der: Vec<u8>,
}

/// A directory for one test's PEM files.
pub fn pem_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("tls")
        .join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn save(dir: &Path, name: &str, pem: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, pem).unwrap();
    path
}

/// Asserts a TLS failure that came at once (not retried) and names every `expected` piece.
pub fn assert_tls_failure(result: (Result<(), ExportError>, Duration), expected: &[&str]) {
    let (result, elapsed) = result;
    let err = result.expect_err("the export must fail");
    let text = err.to_string();
    assert!(
        matches!(err, ExportError::Tls(_)),
        "not a TLS error: {text}"
    );
    for e in expected {
        assert!(text.contains(e), "expected {e:?} in: {text}");
    }
    assert!(
        elapsed < Duration::from_secs(3),
        "a certificate problem is not retried ({elapsed:?}): {text}"
    );
}
