//! Configuration of `sonde run`: one model, [`RunArgs`] (the flags) over a TOML file (`--config`) over
//! one default each, and environment variables for secrets (the bearer token) and `NODE_NAME`
//! (downward API). Every flag is a key of the file (`--frequency` is `frequency_hz`,
//! `--node-name` is `metadata.node_name`, `--otlp-endpoint` is `otlp.endpoint`), and every key can be
//! given on the command line with `--set KEY=VALUE` (a TOML value; it wins over the file). `record`
//! shares the sampling, unwinding and symbol settings ([`SamplingArgs`], [`SymbolArgs`]) and their
//! ranges (`ranges.rs`, the one table of every numeric setting).
//!
//! Everything is validated before anything starts; an error names the offending key. Example file:
//! ```toml
//! export_interval_secs = 10
//! frequency_hz = 99                # on-CPU samples per CPU per second
//! offcpu = false                   # also record off-CPU time
//! offcpu_budget = 500              # off-CPU stack walks per CPU per second (0: all)
//! unwind = "auto"                  # or "fp", "tables"
//! max_unwind_table_mib = 64
//! runtimes = "all"                 # or "python,go", "none"
//! metrics_addr = "127.0.0.1:9464"  # or "none"
//! # duration_secs = 3600           # stop by itself; runs until a signal when absent
//! # summary_json = "/var/log/sonde/windows.jsonl"
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
//! node_name = "node-1"             # default: $NODE_NAME (downward API); enables Kubernetes metadata
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
//! [[relabel]]                      # Prometheus relabel rules over discovery labels (README "Targets");
//! source_labels = ["__meta_kubernetes_namespace"]  # or relabel_file = "rules.yaml" (Alloy/Parca shape)
//! regex = "payments|checkout"
//! action = "keep"
//! ```

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use crate::{
    export::{Backends, pyroscope::PushProtocol},
    metadata::MetadataConfig,
};

mod file_key;
pub(crate) mod ranges;
mod sampling;
mod sinks;
mod symbols;
mod targets;
mod thresholds;

pub use sampling::{Sampling, SamplingArgs};
pub use sinks::DEFAULT_TOKEN_ENV;
pub use symbols::{SymbolArgs, SymbolArgsError, SymbolFile};
pub use thresholds::Thresholds;

/// Where `/metrics`, `/healthz` and `/readyz` are served unless `metrics_addr` says otherwise.
pub const DEFAULT_METRICS_ADDR: &str = "127.0.0.1:9464";

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

/// Arguments of `sonde run`: every setting, each also a key of the config file.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RunArgs {
    /// TOML configuration file.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Set any key of the config file, wins over the file (repeatable): `KEY=VALUE` with a dotted key
    /// and a TOML value, e.g. `otlp.timeout_secs=5` or `retention.max_mib=512`.
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Sampling and unwinding.
    #[command(flatten)]
    pub sampling: SamplingArgs,
    /// Also record off-CPU time (voluntary blocking, from sched_switch) (`offcpu`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, default_missing_value = "true")]
    pub offcpu: Option<bool>,
    /// Symbols of stripped binaries (`[symbols]`).
    #[command(flatten)]
    pub symbols: SymbolArgs,
    /// Address of /metrics, /healthz and /readyz, or `none` (`metrics_addr`) [default:
    /// 127.0.0.1:9464].
    #[arg(long, value_name = "ADDR|none")]
    pub metrics_addr: Option<String>,
    /// Stop by itself after this many seconds (as on SIGTERM); runs until a signal when absent
    /// (`duration_secs`).
    #[arg(long, value_name = "SECS")]
    pub duration: Option<u64>,
    /// Also append each window's figures, and each sink's exit tally, to FILE as JSON lines
    /// (`summary_json`).
    #[arg(long, value_name = "FILE")]
    pub summary_json: Option<PathBuf>,
    /// Benchmark aid: log each window's size as one OTLP request and as one gzip pprof per process
    /// (encodes every window twice, so it adds CPU). Not a key: it is no setting of the agent.
    #[arg(long, hide = true)]
    pub report_wire_bytes: bool,
    /// Test hook: the sampling thread stops making windows after this many (as if stuck).
    #[cfg(feature = "test-hooks")]
    #[arg(long, hide = true)]
    pub test_stall_after_windows: Option<u64>,
    /// Test hook: the sampling thread panics after this many windows.
    #[cfg(feature = "test-hooks")]
    #[arg(long, hide = true)]
    pub test_panic_after_windows: Option<u64>,
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
    /// Test hook: the spool's bound in KiB, below `--spool-max-mib`'s floor of 1 MiB, so a test fills
    /// it in seconds rather than minutes.
    #[cfg(feature = "test-hooks")]
    #[arg(long, hide = true, value_name = "KIB")]
    pub test_spool_max_kib: Option<u64>,
    /// This node's name; enables Kubernetes metadata (`metadata.node_name`). Default: `$NODE_NAME`
    /// (downward API).
    #[arg(long)]
    pub node_name: Option<String>,
    /// Relabel rules as a YAML file in the Alloy/Parca shape (`relabel_configs:` or a list), in
    /// place of `[[relabel]]` in the config file (`relabel_file`).
    #[arg(long, value_name = "FILE")]
    pub relabel_file: Option<PathBuf>,
}

/// The file's shape. Unknown keys are errors.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    export_interval_secs: Option<u64>,
    frequency_hz: Option<u64>,
    offcpu: Option<bool>,
    offcpu_budget: Option<u64>,
    unwind: Option<String>,
    max_unwind_table_mib: Option<u64>,
    runtimes: Option<String>,
    metrics_addr: Option<String>,
    duration_secs: Option<u64>,
    summary_json: Option<PathBuf>,
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
    #[serde(default)]
    relabel: Vec<crate::metadata::relabel::RuleSpec>,
    relabel_file: Option<PathBuf>,
}

#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct FileMetadata {
    node_name: Option<String>,
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
    /// Sampling and unwinding.
    pub sampling: Sampling,
    /// Whether off-CPU time is recorded too.
    pub offcpu: bool,
    /// Where `/metrics` is served; None: nowhere.
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// When to stop by itself; None: at a signal.
    pub duration: Option<Duration>,
    /// Where the window log is appended as JSON lines.
    pub summary_json: Option<PathBuf>,
    /// Relabel rules choosing and labelling the targets (`[[relabel]]` or `relabel_file`).
    pub(crate) relabel: crate::metadata::relabel::Rules,
}

impl DaemonConfig {
    /// Reads `--config` (if any) and merges it with the flags and the process environment.
    pub fn load(args: &RunArgs) -> Result<Self, ConfigError> {
        let mut file = match &args.config {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
                    path: path.clone(),
                    source,
                })?;
                Some((path.clone(), text))
            }
            None => None,
        };
        if !args.set.is_empty() {
            file = Some(set_keys(file, &args.set)?);
        }
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
        let relabel = targets::resolve(
            args.relabel_file.as_deref(),
            file.relabel_file.clone(),
            &file.relabel,
        )?;
        let sampling = args.sampling.resolve(&sampling::SamplingFile {
            frequency_hz: file.frequency_hz,
            offcpu_budget: file.offcpu_budget,
            unwind: file.unwind.clone(),
            max_unwind_table_mib: file.max_unwind_table_mib,
            runtimes: file.runtimes.clone(),
        })?;
        let metrics_addr = args
            .metrics_addr
            .clone()
            .or(file.metrics_addr.clone())
            .map_or(Ok(DEFAULT_METRICS_ADDR.parse().ok()), |a| {
                parse_metrics_addr(&a)
            })?;
        let duration = args
            .duration
            .or(file.duration_secs)
            .map(|s| ranges::RUN_DURATION_SECS.check(s).map(Duration::from_secs))
            .transpose()?;
        let secs = ranges::EXPORT_INTERVAL_SECS.check(
            args.export_interval
                .or(file.export_interval_secs)
                .unwrap_or(10),
        )?;
        let queue_capacity =
            ranges::QUEUE_CAPACITY.check(file.queue_capacity.unwrap_or(8))? as usize;
        let test_spool_kib: Option<u64> = test_hook!(args.test_spool_max_kib);
        let spool = crate::export::spool::SpoolLimits {
            max_bytes: match test_spool_kib {
                Some(kib) => kib << 10,
                None => {
                    ranges::SPOOL_MAX_MIB.check(
                        args.spool_max_mib
                            .or(file.spool_max_mib)
                            .unwrap_or(crate::export::spool::DEFAULT_SPOOL_MAX_MIB),
                    )? << 20
                }
            },
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
                .or(m.node_name)
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
            sampling,
            offcpu: args.offcpu.or(file.offcpu).unwrap_or(false),
            metrics_addr,
            duration,
            summary_json: args.summary_json.clone().or(file.summary_json),
            relabel,
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

/// `metrics_addr`: ADDR:PORT, or `none`.
fn parse_metrics_addr(s: &str) -> Result<Option<std::net::SocketAddr>, ConfigError> {
    if s == "none" {
        return Ok(None);
    }
    s.parse().map(Some).map_err(|_| {
        invalid(
            "metrics_addr (--metrics-addr)",
            s,
            "expected ADDR:PORT (e.g. 127.0.0.1:9464 or [::]:9464) or `none`",
        )
    })
}

/// The file's text with each `--set KEY=VALUE` written over it (dotted keys into their tables; a
/// value that is not TOML is taken as a string), so the file and the flags are read by one parser
/// with one set of key errors.
fn set_keys(
    file: Option<(PathBuf, String)>,
    sets: &[String],
) -> Result<(PathBuf, String), ConfigError> {
    let (path, text) = file.unwrap_or_else(|| (PathBuf::from("--set"), String::new()));
    let parse_error = |key: &str, message: String| ConfigError::Parse {
        path: path.clone(),
        key: key.to_owned(),
        message,
    };
    let mut table: toml::Table =
        toml::from_str(&text).map_err(|e| parse_error("", e.message().to_owned()))?;
    for set in sets {
        let Some((key, value)) = set.split_once('=').filter(|(k, _)| !k.trim().is_empty()) else {
            return Err(invalid(
                "--set",
                set,
                "expected KEY=VALUE with a non-empty KEY",
            ));
        };
        let value = toml::from_str::<toml::Table>(&format!("v = {value}"))
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_owned()));
        let mut at = &mut table;
        let parts: Vec<&str> = key.trim().split('.').collect();
        for part in &parts[..parts.len() - 1] {
            let entry = at
                .entry(part.to_string())
                .or_insert_with(|| toml::Value::Table(toml::Table::new()));
            at = entry
                .as_table_mut()
                .ok_or_else(|| invalid("--set", set, &format!("`{part}` is not a table")))?;
        }
        at.insert(parts[parts.len() - 1].to_owned(), value);
    }
    let text = toml::to_string(&table).map_err(|e| parse_error("", e.to_string()))?;
    Ok((path, text))
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
mod tests;
