//! A process's own context (OTEP 4719, `ProcessContext` of opentelemetry-proto 1.11): a tracer
//! publishes it in a mapping named `OTEL_CTX` (a memfd, or an anonymous mapping it named), headed by
//! `{signature "OTEL_CTX", version 2, payload size u32, published-at u64, payload pointer}`, the
//! payload a protobuf `ProcessContext`. sonde reads it once per capture for the names of the thread
//! records' attribute keys (`threadlocal.attribute_key_map`) and the process's resource attributes.
//!
//! The writer sets published-at to 0 while it updates; a read that sees 0, or another value after
//! the payload was read, is retried later rather than trusted.

use std::fs;

use prost::Message as _;

use crate::{
    process::proc_dir,
    profile::otlp_proto::{common, resource},
    runtimes::memory::ProcessMemory,
};

/// The header's signature and the version read.
const SIGNATURE: &[u8; 8] = b"OTEL_CTX";
const VERSION: u32 = 2;
/// Payloads larger than this are refused (a resource and a key map are a few hundred bytes).
const MAX_PAYLOAD: u32 = 64 << 10;
/// The extra attribute holding the thread records' attribute key names, by index.
const KEY_MAP: &str = "threadlocal.attribute_key_map";

/// `opentelemetry.proto.common.v1.ProcessContext` (opentelemetry-proto 1.11): field numbers as
/// upstream's `process_context.proto`. The vendored OTLP files (1.45.2 of the Python package) predate
/// it, and these two fields are all sonde reads.
#[derive(Clone, PartialEq, prost::Message)]
struct ProcessContext {
    #[prost(message, optional, tag = "1")]
    resource: Option<resource::Resource>,
    #[prost(message, repeated, tag = "2")]
    extra_attributes: Vec<common::KeyValue>,
}

/// What a process published of itself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Published {
    /// The thread records' attribute key names, by index.
    pub(crate) keys: Vec<String>,
    /// Its resource attributes with string values (`service.name`, ...).
    pub(crate) resource: Vec<(String, String)>,
}

/// Why a process context was not read.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Unread {
    /// The process publishes none (no `OTEL_CTX` mapping).
    Absent,
    /// The writer was updating it: look again later.
    Updating,
    /// Malformed, of another version, or unreadable.
    Bad(String),
}

/// The context process `pid` published.
pub(crate) fn read(pid: u32) -> Result<Published, Unread> {
    let maps = fs::read_to_string(proc_dir(pid).join("maps")).map_err(|_| Unread::Absent)?;
    let header_at = mapping(&maps).ok_or(Unread::Absent)?;
    let memory = ProcessMemory::new(pid);
    let bad = |e: std::io::Error| Unread::Bad(e.to_string());
    let mut header = [0u8; 32];
    memory.read(header_at, &mut header).map_err(bad)?;
    let field = |at: usize, n: usize| &header[at..at + n];
    let published_at = u64::from_le_bytes(field(16, 8).try_into().expect("8 bytes"));
    if published_at == 0 {
        return Err(Unread::Updating);
    }
    if field(0, 8) != SIGNATURE {
        return Err(Unread::Bad("no OTEL_CTX signature".into()));
    }
    let version = u32::from_le_bytes(field(8, 4).try_into().expect("4 bytes"));
    if version != VERSION {
        return Err(Unread::Bad(format!("version {version}, not {VERSION}")));
    }
    let size = u32::from_le_bytes(field(12, 4).try_into().expect("4 bytes"));
    if size > MAX_PAYLOAD {
        return Err(Unread::Bad(format!("a payload of {size} bytes")));
    }
    let payload_at = u64::from_le_bytes(field(24, 8).try_into().expect("8 bytes"));
    let mut payload = vec![0u8; size as usize];
    memory.read(payload_at, &mut payload).map_err(bad)?;
    if memory.u64(header_at + 16).map_err(bad)? != published_at {
        return Err(Unread::Updating);
    }
    decode(&payload)
}

/// The start of the process's `OTEL_CTX` mapping, from its maps.
fn mapping(maps: &str) -> Option<u64> {
    maps.lines().find_map(|line| {
        let name = line.split_whitespace().nth(5)?;
        let named = matches!(
            name,
            "/memfd:OTEL_CTX" | "[anon_shmem:OTEL_CTX]" | "[anon:OTEL_CTX]"
        );
        named.then(|| u64::from_str_radix(line.split('-').next()?, 16).ok())?
    })
}

/// What a `ProcessContext` payload says.
fn decode(payload: &[u8]) -> Result<Published, Unread> {
    let context = ProcessContext::decode(payload).map_err(|e| Unread::Bad(e.to_string()))?;
    let keys = context
        .extra_attributes
        .iter()
        .find(|kv| kv.key == KEY_MAP)
        .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
            common::any_value::Value::ArrayValue(array) => Some(
                array
                    .values
                    .iter()
                    .map(|v| match &v.value {
                        Some(common::any_value::Value::StringValue(s)) => s.clone(),
                        _ => String::new(),
                    })
                    .collect(),
            ),
            _ => None,
        })
        .unwrap_or_default();
    let resource = context
        .resource
        .map(|r| r.attributes)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|kv| match kv.value?.value? {
            common::any_value::Value::StringValue(s) => Some((kv.key, s)),
            _ => None,
        })
        .collect();
    Ok(Published { keys, resource })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn string(key: &str, value: &str) -> common::KeyValue {
        common::KeyValue {
            key: key.into(),
            value: Some(common::AnyValue {
                value: Some(common::any_value::Value::StringValue(value.into())),
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_mapping_is_found_by_its_names() {
        let maps = "55d0-55e0 r--p 00000000 fe:00 1 /usr/bin/python3\n\
                    7f94-7f95 rw-p 00000000 00:01 1024 /memfd:OTEL_CTX (deleted)\n";
        assert_eq!(mapping(maps), Some(0x7f94));
        assert_eq!(
            mapping("1000-2000 rw-p 00000000 00:00 0 [anon:OTEL_CTX]\n"),
            Some(0x1000)
        );
        assert_eq!(
            mapping("1000-2000 rw-p 00000000 00:00 0 /memfd:OTEL_CTX_BACKUP\n"),
            None
        );
    }

    /// The payload ddtrace 4.16.0 published (its shape: the resource, then the schema version and
    /// the key map as extra attributes).
    #[test]
    fn the_key_map_and_resource_are_read() {
        let context = ProcessContext {
            resource: Some(resource::Resource {
                attributes: vec![
                    string("service.name", "ddtest"),
                    string("telemetry.sdk.name", "libdatadog"),
                ],
                ..Default::default()
            }),
            extra_attributes: vec![
                string("threadlocal.schema_version", "tlsdesc_v1_dev"),
                common::KeyValue {
                    key: KEY_MAP.into(),
                    value: Some(common::AnyValue {
                        value: Some(common::any_value::Value::ArrayValue(common::ArrayValue {
                            values: vec![common::AnyValue {
                                value: Some(common::any_value::Value::StringValue(
                                    "datadog.local_root_span_id".into(),
                                )),
                            }],
                        })),
                    }),
                    ..Default::default()
                },
            ],
        };
        let published = decode(&context.encode_to_vec()).unwrap();
        assert_eq!(published.keys, ["datadog.local_root_span_id"]);
        assert_eq!(
            published.resource[0],
            ("service.name".into(), "ddtest".into())
        );
        assert!(matches!(decode(&[0xff, 0xff]), Err(Unread::Bad(_))));
    }
}
