//! The `[otlp]`, `[pyroscope]` and `[parca]` sections. The three name a backend the same way (endpoint,
//! headers, credentials, deadline, TLS), so they share one shape, [`FileSink`], and one reading of it,
//! [`remote`]; a key that means nothing to a section (`parca.compression`) is refused by name.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use super::{ConfigError, invalid, ranges};
use crate::{
    export::{
        otlp::{Compression, OtlpConfig},
        parca::ParcaConfig,
        pyroscope::{PushProtocol, PyroscopeConfig},
    },
    remote::RemoteConfig,
};

/// Environment variable read for the OTLP bearer token unless `otlp.bearer_token_env` names another.
pub const DEFAULT_TOKEN_ENV: &str = "SONDE_OTLP_TOKEN";

/// One backend's section of the file.
#[derive(Debug, Default, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct FileSink {
    pub(super) endpoint: Option<String>,
    timeout_secs: Option<u64>,
    #[serde(default)]
    pub(super) headers: BTreeMap<String, String>,
    bearer_token_env: Option<String>,
    bearer_token_file: Option<PathBuf>,
    ca_file: Option<PathBuf>,
    client_cert_file: Option<PathBuf>,
    client_key_file: Option<PathBuf>,
    // OTLP only.
    compression: Option<Compression>,
    max_request_bytes: Option<u64>,
    // Pyroscope only.
    protocol: Option<PushProtocol>,
    tenant_id: Option<String>,
    basic_auth_user: Option<String>,
    basic_auth_password_env: Option<String>,
    basic_auth_password_file: Option<PathBuf>,
}

impl FileSink {
    /// Refuses the keys of other sections that `section` was given.
    fn only(&self, section: &str, allowed: &[&str]) -> Result<(), ConfigError> {
        let given = [
            ("compression", self.compression.is_some()),
            ("max_request_bytes", self.max_request_bytes.is_some()),
            ("protocol", self.protocol.is_some()),
            ("tenant_id", self.tenant_id.is_some()),
            ("basic_auth_user", self.basic_auth_user.is_some()),
            (
                "basic_auth_password_env",
                self.basic_auth_password_env.is_some(),
            ),
            (
                "basic_auth_password_file",
                self.basic_auth_password_file.is_some(),
            ),
        ];
        match given.iter().find(|(k, set)| *set && !allowed.contains(k)) {
            Some((key, _)) => Err(invalid(
                &format!("{section}.{key}"),
                "",
                &format!("not a key of [{section}]"),
            )),
            None => Ok(()),
        }
    }
}

/// `[otlp]` with `endpoint`.
pub(super) fn otlp(
    endpoint: String,
    file: FileSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<OtlpConfig, ConfigError> {
    file.only("otlp", &["compression", "max_request_bytes"])?;
    let mut config = OtlpConfig::new(endpoint);
    config.remote = remote(
        "otlp",
        &config.remote.endpoint,
        &file,
        DEFAULT_TOKEN_ENV,
        env,
    )?;
    config.compression = file.compression.unwrap_or_default();
    if let Some(max) = file.max_request_bytes {
        config.max_request_bytes = ranges::OTLP_MAX_REQUEST_BYTES.check(max)? as usize;
    }
    Ok(config)
}

/// `[pyroscope]` with `endpoint`; `protocol` is the flag's, which wins over the file.
pub(super) fn pyroscope(
    endpoint: String,
    protocol: Option<PushProtocol>,
    file: FileSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<PyroscopeConfig, ConfigError> {
    file.only(
        "pyroscope",
        &[
            "protocol",
            "tenant_id",
            "basic_auth_user",
            "basic_auth_password_env",
            "basic_auth_password_file",
        ],
    )?;
    let mut config = PyroscopeConfig::new(endpoint);
    config.protocol = protocol.or(file.protocol).unwrap_or_default();
    let mut remote = remote(
        "pyroscope",
        &config.remote.endpoint,
        &file,
        "SONDE_PYROSCOPE_TOKEN",
        env,
    )?;
    if let Some(tenant) = file.tenant_id.as_deref().filter(|t| !t.is_empty()) {
        check_header("pyroscope.tenant_id", "X-Scope-OrgID", tenant)?;
        remote.headers.push(("X-Scope-OrgID".into(), tenant.into()));
    }
    if let Some(user) = &file.basic_auth_user {
        let password = secret(
            "pyroscope.basic_auth_password",
            file.basic_auth_password_file.as_ref(),
            file.basic_auth_password_env
                .as_deref()
                .unwrap_or("SONDE_PYROSCOPE_PASSWORD"),
            env,
        )?
        .unwrap_or_default();
        if remote
            .headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"))
        {
            return Err(invalid(
                "pyroscope.basic_auth_user",
                user,
                "basic auth and a bearer token (or an authorization header) exclude each other: keep one",
            ));
        }
        use base64::Engine as _;
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        remote
            .headers
            .push(("authorization".into(), format!("Basic {token}")));
    }
    config.remote = remote;
    Ok(config)
}

/// `[parca]` with `endpoint`.
pub(super) fn parca(
    endpoint: String,
    file: FileSink,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ParcaConfig, ConfigError> {
    file.only("parca", &[])?;
    let mut config = ParcaConfig::new(endpoint);
    config.remote = remote(
        "parca",
        &config.remote.endpoint,
        &file,
        "SONDE_PARCA_TOKEN",
        env,
    )?;
    Ok(config)
}

/// The endpoint, deadline, headers, bearer token and TLS files of a section.
fn remote(
    section: &'static str,
    endpoint: &str,
    file: &FileSink,
    default_token_env: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<RemoteConfig, ConfigError> {
    if !(endpoint.starts_with("http://") || endpoint.starts_with("https://"))
        || tonic::transport::Endpoint::from_shared(endpoint.to_owned()).is_err()
    {
        return Err(invalid(
            &format!("{section}.endpoint (--{section}-endpoint)"),
            endpoint,
            "expected an http:// or https:// URL such as http://localhost:4317",
        ));
    }
    let mut config = RemoteConfig::new(section, endpoint);
    if let Some(secs) = file.timeout_secs {
        config.timeout = Duration::from_secs(ranges::OTLP_TIMEOUT_SECS.check(secs)?);
    }
    config.ca_file = file.ca_file.clone();
    config.client_cert_file = file.client_cert_file.clone();
    config.client_key_file = file.client_key_file.clone();
    for (name, value) in &file.headers {
        check_header(&format!("{section}.headers.{name}"), name, value)?;
        config.headers.push((name.clone(), value.clone()));
    }
    let token = secret(
        &format!("{section}.bearer_token"),
        file.bearer_token_file.as_ref(),
        file.bearer_token_env
            .as_deref()
            .unwrap_or(default_token_env),
        env,
    )?;
    if let Some(token) = token {
        check_header(
            &format!("{section}.bearer_token"),
            "authorization",
            &format!("Bearer {token}"),
        )
        .map_err(|_| {
            invalid(
                &format!("{section}.bearer_token"),
                "<redacted>",
                "the token must be printable ASCII",
            )
        })?;
        config
            .headers
            .push(("authorization".to_owned(), format!("Bearer {token}")));
    }
    Ok(config)
}

/// A secret from its file when one is named, else from the environment variable `var`.
fn secret(
    key: &str,
    file: Option<&PathBuf>,
    var: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<String>, ConfigError> {
    match file {
        Some(path) => Ok(Some(
            std::fs::read_to_string(path)
                .map_err(|source| ConfigError::Token {
                    key: format!("{key}_file"),
                    path: path.clone(),
                    source,
                })?
                .trim()
                .to_owned(),
        )),
        None => Ok(env(var).filter(|t| !t.is_empty())),
    }
}

/// Refuses a header gRPC metadata (and HTTP) cannot carry.
fn check_header(key: &str, name: &str, value: &str) -> Result<(), ConfigError> {
    let name_ok =
        tonic::metadata::AsciiMetadataKey::from_bytes(name.to_ascii_lowercase().as_bytes()).is_ok();
    if !name_ok
        || value
            .parse::<tonic::metadata::AsciiMetadataValue>()
            .is_err()
    {
        return Err(invalid(
            key,
            value,
            "not a valid gRPC header name/value (ASCII)",
        ));
    }
    Ok(())
}
