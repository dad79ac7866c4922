//! Configuration of `sonde run`: a TOML file (`--config`), flags for the common settings, and environment
//! variables for secrets (the bearer token) and `NODE_NAME` (downward API). Flags win over the file.
//!
//! Everything is validated before anything starts; an error names the offending key. Example file:
//! ```toml
//! export_interval_secs = 10
//! data_dir = "/var/lib/sonde"
//! data_mode = "0600"              # files 0600, directories 0700; "0640" lets a log-reader group read
//! queue_capacity = 8
//! spool_max_mib = 256              # OTLP: disk spool for windows the backend cannot take now
//! spool_max_age_secs = 86400       # optional: spooled windows older than this are dropped
//! [labels]
//! "deployment.environment.name" = "prod"
//! [otlp]
//! endpoint = "https://otlp.example.com:4317"
//! compression = "gzip"            # or "zstd", "none"
//! timeout_secs = 10
//! headers = { "X-Scope-OrgID" = "team-a" }
//! bearer_token_env = "SONDE_OTLP_TOKEN"   # the default; or bearer_token_file = "/run/secrets/otlp-token"
//! ca_file = "/etc/sonde/otlp-ca.pem"            # trusted besides the system roots
//! client_cert_file = "/etc/sonde/client.pem"    # mutual TLS: both or neither
//! client_key_file = "/etc/sonde/client-key.pem"
//! [metadata]
//! region = "eu-west-1"            # when the node has no topology.kubernetes.io/region label
//! service_name_label = "app.kubernetes.io/name"
//! service_version_label = "app.kubernetes.io/version"
//! [symbols]                        # the symbol flags; a flag wins, then this, then $DEBUGINFOD_URLS
//! debug_dirs = ["/srv/debug"]
//! debuginfod_urls = "https://debuginfod.debian.net"
//! debuginfod_cache_dir = "/var/cache/sonde/debuginfod"
//! debuginfod_cache_mib = 2048
//! debuginfod_timeout_secs = 10
//! debuginfod_negative_ttl_secs = 600
//! [retention]                      # local data directory: dense recent windows, sparse history
//! recent_secs = 86400              # every window for a day,
//! hourly_secs = 1209600            # then one merged profile per process and hour for 14 days,
//! per_release_secs = 7776000       # and the last per_release_keep hourly profiles of each
//! per_release_keep = 24            #   service.version for 90 days;
//! max_mib = 2048                   # all under this cap (oldest deleted first, counted)
//! ```

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    export::{Backends, pyroscope::PushProtocol},
    metadata::MetadataConfig,
    symbolize::SymbolFile,
};

mod file_key;
mod ranges;
mod sinks;
mod thresholds;

pub use sinks::DEFAULT_TOKEN_ENV;
pub use thresholds::Thresholds;

use file_key::parse_file;

/// Errors in the configuration; each names the key and says what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file {path}: check the --config path and its permissions")]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML or has an unknown key or a wrongly typed value.
    #[error("invalid config file {path}, key `{key}`: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The dotted key at fault.
        key: String,
        /// What is wrong.
        message: String,
    },
    /// A value is out of range or malformed.
    #[error("invalid value {value:?} for `{key}`: {reason}")]
    Invalid {
        /// The key or flag.
        key: String,
        /// The value given.
        value: String,
        /// What is expected.
        reason: String,
    },
    /// A secret's file (bearer token, password) could not be read.
    #[error("cannot read {path} (`{key}`): check the path and that sonde may read it")]
    Token {
        /// The key naming the file.
        key: String,
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Arguments of `sonde run`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// TOML configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// OTLP gRPC endpoint (http:// or https://); without any endpoint, profiles go to the local data
    /// directory.
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Grafana Pyroscope (or Grafana Cloud Profiles, Alloy's pyroscope.receive_http) push endpoint,
    /// e.g. http://pyroscope:4040; `[pyroscope]` in the file.
    #[arg(long, value_name = "URL")]
    pub pyroscope_endpoint: Option<String>,
    /// How to push to Pyroscope: connect (HTTP/1.1, the default) or grpc (HTTP/2).
    #[arg(long, value_name = "PROTOCOL")]
    pub pyroscope_protocol: Option<PushProtocol>,
    /// Parca's gRPC endpoint (WriteRaw), e.g. http://parca:7070; `[parca]` in the file.
    #[arg(long, value_name = "URL")]
    pub parca_endpoint: Option<String>,
    /// Seconds per export window.
    #[arg(long, value_name = "SECS")]
    pub export_interval: Option<u64>,
    /// Static label added to every profile (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
    /// Header sent with every OTLP request (repeatable; wins over `otlp.headers` in the file), e.g.
    /// a tenant: `X-Scope-OrgID=team-a`.
    #[arg(long = "otlp-header", value_name = "KEY=VALUE")]
    pub otlp_headers: Vec<String>,
    /// Local data directory (default ./sonde-data, /var/lib/sonde under systemd).
    #[arg(long)]
    pub data_dir: Option<PathBuf>,
    /// Mode of the files sonde writes (directories get `x` where `r` is): 0600 (default) or 0640 to let
    /// the directory's group read profiles. Applied whatever the umask.
    #[arg(long, value_name = "MODE")]
    pub data_mode: Option<crate::storage::DataMode>,
    /// Test hook: the hourly tier's "hour", in seconds, so retention can be seen in a test's minute.
    #[cfg(feature = "test-hooks")]
    #[arg(long, hide = true, value_name = "SECS")]
    pub test_retention_hour_secs: Option<u64>,
    /// Bound of the disk spool (`<data-dir>/spool`) that keeps windows an OTLP backend cannot take now,
    /// MiB; the oldest are dropped beyond it [default: 256].
    #[arg(long, value_name = "MIB")]
    pub spool_max_mib: Option<u64>,
    /// This node's name; enables Kubernetes metadata. Default: `$NODE_NAME` (downward API).
    #[arg(long)]
    pub node_name: Option<String>,
}

/// The file's shape. Unknown keys are errors.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    export_interval_secs: Option<u64>,
    data_dir: Option<PathBuf>,
    data_mode: Option<crate::storage::DataMode>,
    #[serde(default)]
    retention: crate::retention::RetentionFile,
    queue_capacity: Option<u64>,
    spool_max_mib: Option<u64>,
    spool_max_age_secs: Option<u64>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default)]
    otlp: sinks::FileSink,
    #[serde(default)]
    pyroscope: sinks::FileSink,
    #[serde(default)]
    parca: sinks::FileSink,
    #[serde(default)]
    metadata: FileMetadata,
    #[serde(default)]
    symbols: SymbolFile,
    #[serde(default)]
    status: Thresholds,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMetadata {
    host_name: Option<String>,
    region: Option<String>,
    service_name_label: Option<String>,
    service_version_label: Option<String>,
    cache_capacity: Option<u64>,
    proc_root: Option<PathBuf>,
}

/// The merged, validated configuration of the daemon.
#[derive(Debug, Clone)]
pub struct DaemonConfig {
    /// Length of an export window.
    pub export_interval: Duration,
    /// Where the local sink writes (used when no backend is configured), and the spools.
    pub data_dir: PathBuf,
    /// Permission bits of what sonde writes in `data_dir` (and its other directories).
    pub data_mode: crate::storage::DataMode,
    /// Tiers of the local data directory (`[retention]`).
    pub retention: crate::retention::Policy,
    /// The remote backends (OTLP, Pyroscope, Parca); none: the local data directory.
    pub backends: Backends,
    /// Windows kept while the backend is slow or down.
    pub queue_capacity: usize,
    /// Bounds of each remote sink's disk spool.
    pub spool: crate::export::spool::SpoolLimits,
    /// Metadata settings, static labels included.
    pub metadata: MetadataConfig,
    /// The `[symbols]` table, completed by the symbol flags (`SymbolArgs::with_file`).
    pub symbols: SymbolFile,
    /// The `[status]` table: thresholds of `sonde status`.
    pub status: Thresholds,
}

impl DaemonConfig {
    /// Reads `--config` (if any) and merges it with the flags and the process environment.
    pub fn load(args: &RunArgs) -> Result<Self, ConfigError> {
        let file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                Some((path.clone(), text))
            }
            None => None,
        };
        Self::merge(
            file.as_ref().map(|(p, t)| (p.as_path(), t.as_str())),
            args,
            &|k| std::env::var(k).ok(),
        )
    }

    /// Merges file text, flags and an environment lookup (injectable for tests).
    pub fn merge(
        file: Option<(&Path, &str)>,
        args: &RunArgs,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let file = match file {
            Some((path, text)) => parse_file(path, text)?,
            None => FileConfig::default(),
        };
        let secs = ranges::EXPORT_INTERVAL_SECS.check(
            args.export_interval
                .or(file.export_interval_secs)
                .unwrap_or(10),
        )?;
        let queue_capacity =
            ranges::QUEUE_CAPACITY.check(file.queue_capacity.unwrap_or(8))? as usize;
        let spool = crate::export::spool::SpoolLimits {
            max_bytes: ranges::SPOOL_MAX_MIB.check(
                args.spool_max_mib
                    .or(file.spool_max_mib)
                    .unwrap_or(crate::export::spool::DEFAULT_SPOOL_MAX_MIB),
            )? << 20,
            max_age: file
                .spool_max_age_secs
                .map(|s| ranges::SPOOL_MAX_AGE_SECS.check(s).map(Duration::from_secs))
                .transpose()?,
        };
        ranges::check_thresholds(&file.status)?;
        let data_dir = args.data_dir.clone().or(file.data_dir).unwrap_or_else(|| {
            // systemd sets INVOCATION_ID for services: use the conventional state directory there.
            if env("INVOCATION_ID").is_some() {
                PathBuf::from("/var/lib/sonde")
            } else {
                PathBuf::from("./sonde-data")
            }
        });

        let mut static_labels = file.labels;
        for label in &args.labels {
            let (k, v) = parse_label(label)?;
            static_labels.insert(k, v);
        }
        if let Some(k) = static_labels.keys().find(|k| k.trim().is_empty()) {
            return Err(invalid("labels", k, "label keys must not be empty"));
        }

        let mut file_otlp = file.otlp;
        for header in &args.otlp_headers {
            let (k, v) = match header.split_once('=') {
                Some((k, v)) if !k.trim().is_empty() => (k.trim().to_owned(), v.to_owned()),
                _ => {
                    return Err(invalid(
                        "--otlp-header",
                        header,
                        "expected KEY=VALUE with a non-empty KEY",
                    ));
                }
            };
            file_otlp.headers.insert(k, v);
        }
        let endpoint = |flag: &Option<String>, file: &sinks::FileSink| {
            flag.clone()
                .or(file.endpoint.clone())
                .filter(|e| !e.is_empty())
        };
        let mut backends = Backends::default();
        if let Some(e) = endpoint(&args.otlp_endpoint, &file_otlp) {
            backends.otlp = Some(sinks::otlp(e, file_otlp, env)?);
        }
        if let Some(e) = endpoint(&args.pyroscope_endpoint, &file.pyroscope) {
            backends.pyroscope = Some(sinks::pyroscope(
                e,
                args.pyroscope_protocol,
                file.pyroscope,
                env,
            )?);
        }
        if let Some(e) = endpoint(&args.parca_endpoint, &file.parca) {
            backends.parca = Some(sinks::parca(e, file.parca, env)?);
        }

        let defaults = MetadataConfig::default();
        let m = file.metadata;
        let cache_capacity = ranges::METADATA_CACHE_CAPACITY
            .check(m.cache_capacity.unwrap_or(defaults.cache_capacity as u64))?
            as usize;
        let metadata = MetadataConfig {
            host_name: m.host_name,
            region: m.region,
            node_name: args
                .node_name
                .clone()
                .or_else(|| env("NODE_NAME"))
                .filter(|n| !n.is_empty()),
            service_name_label: m.service_name_label.unwrap_or(defaults.service_name_label),
            service_version_label: m
                .service_version_label
                .unwrap_or(defaults.service_version_label),
            static_labels,
            proc_root: m.proc_root.unwrap_or(defaults.proc_root),
            cache_capacity,
        };
        Ok(Self {
            export_interval: Duration::from_secs(secs),
            data_dir,
            data_mode: args.data_mode.or(file.data_mode).unwrap_or_default(),
            retention: file
                .retention
                .policy(test_hook!(args.test_retention_hour_secs))
                .map_err(|e| match e {
                    crate::retention::RetentionError::Range {
                        key,
                        value,
                        expected,
                    } => invalid(&format!("retention.{key}"), &value.to_string(), expected),
                    other => invalid("retention", "", &other.to_string()),
                })?,
            backends,
            queue_capacity,
            spool,
            metadata,
            symbols: file.symbols,
            status: file.status,
        })
    }
}

fn invalid(key: &str, value: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

/// `KEY=VALUE` of `--label`.
pub fn parse_label(label: &str) -> Result<(String, String), ConfigError> {
    match label.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() => Ok((k.trim().to_owned(), v.to_owned())),
        _ => Err(invalid(
            "--label",
            label,
            "expected KEY=VALUE with a non-empty KEY",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn merge(text: &str, args: &RunArgs) -> Result<DaemonConfig, ConfigError> {
        DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), args, &|_| None)
    }

    #[test]
    fn flags_win_over_the_file() {
        let args = RunArgs {
            otlp_endpoint: Some("http://127.0.0.1:4317".into()),
            export_interval: Some(15),
            labels: vec!["team=core".into()],
            ..Default::default()
        };
        let c = merge(
            "export_interval_secs = 30\n[labels]\nenv = \"prod\"\nteam = \"x\"\n",
            &args,
        )
        .unwrap();
        assert_eq!(c.export_interval, Duration::from_secs(15));
        assert_eq!(
            c.backends.otlp.unwrap().remote.endpoint,
            "http://127.0.0.1:4317"
        );
        assert_eq!(
            c.metadata.static_labels.get("team").map(String::as_str),
            Some("core")
        );
        assert_eq!(
            c.metadata.static_labels.get("env").map(String::as_str),
            Some("prod")
        );
    }

    #[test]
    fn bearer_token_from_env_becomes_a_header() {
        let args = RunArgs {
            otlp_endpoint: Some("https://otlp.example.com".into()),
            ..Default::default()
        };
        let env = |k: &str| (k == DEFAULT_TOKEN_ENV).then(|| "s3cret".to_owned());
        let c = DaemonConfig::merge(None, &args, &env).unwrap();
        let headers = c.backends.otlp.unwrap().remote.headers;
        assert!(
            headers.contains(&("authorization".into(), "Bearer s3cret".into())),
            "{headers:?}"
        );
    }

    #[test]
    fn no_endpoint_means_local_directory() {
        let c = DaemonConfig::merge(None, &RunArgs::default(), &|_| None).unwrap();
        assert!(c.backends.is_empty());
        assert_eq!(c.data_dir, PathBuf::from("./sonde-data"));
        let c = DaemonConfig::merge(None, &RunArgs::default(), &|k| {
            (k == "INVOCATION_ID").then(|| "x".into())
        })
        .unwrap();
        assert_eq!(c.data_dir, PathBuf::from("/var/lib/sonde"));
    }

    #[test]
    fn bad_label_flag_is_named() {
        let args = RunArgs {
            labels: vec!["novalue".into()],
            ..Default::default()
        };
        let err = DaemonConfig::merge(None, &args, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--label") && err.contains("KEY=VALUE"),
            "{err}"
        );
    }

    #[test]
    fn otlp_header_flags_win_over_the_file_and_client_certificates_are_read() {
        let args = RunArgs {
            otlp_headers: vec!["X-Scope-OrgID=team-b".into()],
            ..Default::default()
        };
        let text = "[otlp]\nendpoint = \"https://otlp:4317\"\nheaders = { \"X-Scope-OrgID\" = \"team-a\" }\n\
                    client_cert_file = \"/c.pem\"\nclient_key_file = \"/k.pem\"\n";
        let c = DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), &args, &|_| None)
            .unwrap()
            .backends
            .otlp
            .unwrap()
            .remote;
        assert!(
            c.headers
                .iter()
                .any(|(k, v)| k.eq_ignore_ascii_case("x-scope-orgid") && v == "team-b"),
            "{:?}",
            c.headers
        );
        assert_eq!(c.client_cert_file, Some(PathBuf::from("/c.pem")));
        assert_eq!(c.client_key_file, Some(PathBuf::from("/k.pem")));
        let bad = RunArgs {
            otlp_headers: vec!["novalue".into()],
            ..Default::default()
        };
        let err = DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), &bad, &|_| None);
        assert!(err.unwrap_err().to_string().contains("--otlp-header"));
    }

    #[test]
    fn pyroscope_and_parca_sections_take_their_own_keys() {
        let text = "[pyroscope]\nendpoint = \"https://profiles.example.com\"\ntenant_id = \"team-a\"\n\
                    basic_auth_user = \"123456\"\nprotocol = \"grpc\"\n\
                    [parca]\nendpoint = \"http://parca:7070\"\n";
        let env = |k: &str| (k == "SONDE_PYROSCOPE_PASSWORD").then(|| "glc_secret".to_owned());
        let c = DaemonConfig::merge(
            Some((Path::new("sonde.toml"), text)),
            &RunArgs::default(),
            &env,
        )
        .unwrap();
        let p = c.backends.pyroscope.unwrap();
        assert_eq!(p.protocol, crate::export::pyroscope::PushProtocol::Grpc);
        let header = |name: &str| {
            p.remote
                .headers
                .iter()
                .find(|(k, _)| k.eq_ignore_ascii_case(name))
                .map(|(_, v)| v.clone())
        };
        assert_eq!(header("x-scope-orgid").as_deref(), Some("team-a"));
        // base64("123456:glc_secret")
        assert_eq!(
            header("authorization").as_deref(),
            Some("Basic MTIzNDU2OmdsY19zZWNyZXQ=")
        );
        assert_eq!(
            c.backends.parca.unwrap().remote.endpoint,
            "http://parca:7070"
        );
        assert!(c.backends.otlp.is_none());
        // A key of another section is refused by name.
        let bad = "[parca]\nendpoint = \"http://parca:7070\"\ncompression = \"zstd\"\n";
        let err = merge(bad, &RunArgs::default()).unwrap_err().to_string();
        assert!(err.contains("parca.compression"), "{err}");
        // The protocol flag wins over the file.
        let args = RunArgs {
            pyroscope_endpoint: Some("http://pyroscope:4040".into()),
            pyroscope_protocol: Some(crate::export::pyroscope::PushProtocol::Connect),
            ..Default::default()
        };
        let c = DaemonConfig::merge(Some((Path::new("sonde.toml"), text)), &args, &env).unwrap();
        let p = c.backends.pyroscope.unwrap();
        assert_eq!(p.remote.endpoint, "http://pyroscope:4040");
        assert_eq!(p.protocol, crate::export::pyroscope::PushProtocol::Connect);
    }
}
