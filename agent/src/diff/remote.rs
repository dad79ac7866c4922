//! `sonde diff --pyroscope URL` and `--parca URL`: each selector of a side is fetched from the backend as
//! one profile merged over the time range, and handed to the loader as an input like a file, so both
//! sides go through the same bounded decoding, ranking, output and release gate as files do.
//!
//! The backend is as untrusted as a file: its answer is held to `--max-input-mib` before and after
//! decompression, and decoded by the same streaming decoder.

use std::{path::PathBuf, time::Duration};

use prost::Message as _;

use super::{
    DiffArgs,
    datadir::parse_time,
    error::{DiffError, Stream},
    input::{self, Limits},
    load::Source,
    wire::{self, LabelIndexes},
};
use crate::remote::{
    RemoteConfig, RemoteError,
    connect::ConnectClient,
    proto::{
        parca::query::v1alpha1::{
            MergeProfile, QueryRequest,
            query_request::{Mode, Options, ReportType},
            query_response::Report,
            query_service_client::QueryServiceClient,
        },
        querier::v1::SelectMergeProfileRequest,
    },
};

/// What sonde's sinks push on-CPU profiles as, in Pyroscope's profile type id form.
const PYROSCOPE_PROFILE_TYPE: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds";
/// The same in Parca's form, where sonde's CPU samples are deltas.
const PARCA_PROFILE_TYPE: &str = "process_cpu:cpu:nanoseconds:cpu:nanoseconds:delta";
const SELECT_MERGE_PROFILE: &str = "/querier.v1.QuerierService/SelectMergeProfile";
/// A merge over hours of data takes the backend far longer than the agent's pushes are given.
const TIMEOUT: Duration = Duration::from_secs(60);
/// Time range when `--since`/`--until` are not given.
const DEFAULT_SINCE: &str = "now-1h";
const DEFAULT_UNTIL: &str = "now";

/// A backend `sonde diff` can query.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Backend {
    /// Grafana Pyroscope, over the Connect protocol on its HTTP port.
    Pyroscope,
    /// Parca, over gRPC.
    Parca,
}

impl Backend {
    /// Its name in messages, the sinks' configuration section (which the shared client's TLS errors
    /// name), and the variable that holds its bearer token.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Backend::Pyroscope => ("Pyroscope", "pyroscope", "SONDE_PYROSCOPE_TOKEN"),
            Backend::Parca => ("Parca", "parca", "SONDE_PARCA_TOKEN"),
        }
    }

    fn name(self) -> &'static str {
        self.names().0
    }
}

enum Client {
    Pyroscope(ConnectClient),
    Parca(
        QueryServiceClient<tonic::transport::Channel>,
        tonic::metadata::MetadataMap,
    ),
}

/// One backend and one time range, queried once per selector.
struct Querier<'a> {
    backend: Backend,
    url: &'a str,
    config: RemoteConfig,
    client: Client,
    profile_type: Option<&'a str>,
    /// Unix nanoseconds, and as given for messages.
    range: (i64, i64),
    range_text: (&'a str, &'a str),
    limits: Limits,
}

/// Fetches every selector of both sides from `backend` at `url`.
pub(crate) fn fetch_sides(
    args: &DiffArgs,
    backend: Backend,
    url: &str,
    limits: Limits,
) -> Result<(Vec<Source>, Vec<Source>), DiffError> {
    let since = args.since.as_deref().unwrap_or(DEFAULT_SINCE);
    let until = args.until.as_deref().unwrap_or(DEFAULT_UNTIL);
    let range = (parse_time(since)?, parse_time(until)?);
    if range.0 >= range.1 {
        return Err(DiffError::EmptyRange {
            since: since.to_owned(),
            until: until.to_owned(),
        });
    }
    let unusable = |reason: String| DiffError::Backend {
        backend: backend.name(),
        url: url.to_owned(),
        reason,
    };
    // The Connect client would take any string and fail at the first request, with a vaguer message.
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(unusable("not an http:// or https:// URL".into()));
    }
    let (_, section, token_env) = backend.names();
    let mut config = RemoteConfig::new(section, url);
    config.timeout = TIMEOUT;
    if let Some(tenant) = &args.tenant_id {
        config
            .headers
            .push(("X-Scope-OrgID".into(), tenant.clone()));
    }
    if let Some(token) = std::env::var(token_env).ok().filter(|t| !t.is_empty()) {
        config
            .headers
            .push(("authorization".into(), format!("Bearer {token}")));
    }
    // A single-threaded runtime for the fetch alone: the rest of the diff is synchronous, and the two
    // sides' requests still overlap on it.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| unusable(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        let client = match backend {
            Backend::Pyroscope => ConnectClient::new(&config).map(Client::Pyroscope),
            Backend::Parca => config.grpc_channel().and_then(|channel| {
                // tonic's 4 MiB default is below a busy service's merged hour.
                let limit = usize::try_from(limits.max_input_bytes()).unwrap_or(usize::MAX);
                let client = QueryServiceClient::new(channel).max_decoding_message_size(limit);
                Ok(Client::Parca(client, config.metadata()?))
            }),
        }
        .map_err(|e| unusable(remote_error(&e, backend)))?;
        let querier = Querier {
            backend,
            url,
            config,
            client,
            profile_type: args.profile_type.as_deref(),
            range,
            range_text: (since, until),
            limits,
        };
        tokio::try_join!(
            querier.side("base", &args.base),
            querier.side("new", &args.new)
        )
    })
}

/// A [`RemoteError`] in the words of the command line rather than of the configuration file.
fn remote_error(error: &RemoteError, backend: Backend) -> String {
    match error {
        RemoteError::Endpoint { .. } => "not an http:// or https:// URL".into(),
        RemoteError::Header { name, .. } if name == "authorization" => {
            format!("${} is not a valid header value", backend.names().2)
        }
        RemoteError::Header { .. } => "--tenant-id is not a valid header value".into(),
        RemoteError::Tls(e) => e.to_string(),
    }
}

impl Querier<'_> {
    async fn side(
        &self,
        side: &'static str,
        selectors: &[String],
    ) -> Result<Vec<Source>, DiffError> {
        let mut sources = Vec::with_capacity(selectors.len());
        for selector in selectors {
            sources.push(self.fetch(side, selector).await?);
        }
        Ok(sources)
    }

    /// Parca's query names the profile type before the labels; a bare `{...}` gets the type prepended.
    fn parca_query(&self, selector: &str) -> String {
        match selector.starts_with('{') {
            true => format!(
                "{}{selector}",
                self.profile_type.unwrap_or(PARCA_PROFILE_TYPE)
            ),
            false => selector.to_owned(),
        }
    }

    async fn fetch(&self, side: &'static str, selector: &str) -> Result<Source, DiffError> {
        let (start, end) = self.range;
        let (query, profile_type, answer) = match &self.client {
            Client::Pyroscope(client) => {
                let profile_type = self.profile_type.unwrap_or(PYROSCOPE_PROFILE_TYPE);
                let request = SelectMergeProfileRequest {
                    profile_type_id: profile_type.to_owned(),
                    label_selector: selector.to_owned(),
                    start: start.div_euclid(1_000_000),
                    end: end.div_euclid(1_000_000),
                    ..Default::default()
                };
                let answer = client
                    .unary(SELECT_MERGE_PROFILE, request.encode_to_vec())
                    .await
                    .map(Vec::from);
                (selector.to_owned(), profile_type.to_owned(), answer)
            }
            Client::Parca(client, metadata) => {
                let query = self.parca_query(selector);
                let profile_type = query.split('{').next().unwrap_or_default().to_owned();
                let request = QueryRequest {
                    mode: Mode::Merge.into(),
                    options: Some(Options::Merge(MergeProfile {
                        query: query.clone(),
                        start: Some(timestamp(start)),
                        end: Some(timestamp(end)),
                    })),
                    report_type: ReportType::Pprof.into(),
                    ..Default::default()
                };
                let answer = client
                    .clone()
                    .query(self.config.request(request, metadata))
                    .await
                    .and_then(|response| match response.into_inner().report {
                        Some(Report::Pprof(bytes)) => Ok(bytes),
                        _ => Err(tonic::Status::internal("the answer holds no pprof report")),
                    });
                (query, profile_type, answer)
            }
        };
        let answer = answer.map_err(|status| DiffError::Fetch {
            side,
            backend: self.backend.name(),
            url: self.url.to_owned(),
            selector: query.clone(),
            reason: describe(&status),
        })?;
        let name = PathBuf::from(format!("{} {} {query}", self.backend.name(), self.url));
        if answer.len() as u64 > self.limits.max_input_bytes() {
            return Err(DiffError::TooLarge {
                path: name,
                stream: Stream::Compressed,
                limit_mib: self.limits.max_input_mib,
            });
        }
        // Parca's pprof report is gzip, Pyroscope's answer a plain message.
        let bytes = match input::is_gzip(&answer) {
            true => input::gunzip(&name, &answer, self.limits)?,
            false => answer,
        };
        // A selector that matches nothing is answered with an empty profile, not an error; say so here,
        // where the selector and range are known. A malformed answer is left to the loader to name.
        if matches!(
            wire::for_each_sample(&bytes, LabelIndexes::default(), |_| {}),
            Ok(0)
        ) {
            return Err(DiffError::NoSamples {
                side,
                backend: self.backend.name(),
                url: self.url.to_owned(),
                selector: query,
                profile_type,
                range: Box::new((self.range_text.0.to_owned(), self.range_text.1.to_owned())),
            });
        }
        Ok(Source::Fetched { name, bytes })
    }
}

fn timestamp(unix_nanos: i64) -> prost_types::Timestamp {
    prost_types::Timestamp {
        seconds: unix_nanos.div_euclid(1_000_000_000),
        nanos: unix_nanos.rem_euclid(1_000_000_000) as i32,
    }
}

/// A failed call in words: the status, its causes (a refused connection is only there), and what to check.
fn describe(status: &tonic::Status) -> String {
    let mut text = format!("{:?}: {}", status.code(), status.message());
    let mut source = std::error::Error::source(status);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    let hint = match status.code() {
        tonic::Code::Unavailable => "; is the server up and the URL right?",
        tonic::Code::Unauthenticated | tonic::Code::PermissionDenied => {
            "; check the token and --tenant-id"
        }
        tonic::Code::InvalidArgument => "; check the selector's syntax and --profile-type",
        tonic::Code::Unimplemented => {
            "; is the URL the querier's (Pyroscope's HTTP port, Parca's gRPC)?"
        }
        _ => "",
    };
    text.push_str(hint);
    text
}
