//! One spool file: a spooled batch's encoded requests with their identity, checksummed.
//!
//! Layout (integers little-endian):
//! ```text
//! "SONDESPL"  u32 version (1)  u32 header length  header (JSON)  body (gzip)  u32 CRC-32 of all before it
//! ```
//! The header names the batch (`batch_id`, window start and end); the body is each request as a `u32`
//! length and its bytes, exactly what goes on the wire, so replay sends what the live path would have
//! sent. The checksum covers everything, so a torn or bit-flipped file is found before anything is sent.

use std::io::{Read as _, Write as _};

use flate2::{Compression, read::GzDecoder, write::GzEncoder};

/// What a spool file holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SpooledBatch {
    /// The batch's stable id (`sonde.batch.id`): `<run id, 16 hex digits>-<sequence>`.
    pub(crate) batch_id: String,
    /// Window start, nanoseconds since the Unix epoch.
    pub(crate) start_unix_nanos: i64,
    /// Window end, nanoseconds since the Unix epoch.
    pub(crate) end_unix_nanos: i64,
    /// The encoded requests, in order.
    pub(crate) requests: Vec<Vec<u8>>,
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    batch_id: String,
    start_unix_nanos: i64,
    end_unix_nanos: i64,
    requests: u32,
}

const MAGIC: &[u8; 8] = b"SONDESPL";
const VERSION: u32 = 1;
/// A header is a few hundred bytes; more is not a spool file.
const MAX_HEADER: usize = 4096;
/// Decompressed body bound: a window's requests are a few MiB at most (4 MiB each by default).
const MAX_BODY: u64 = 1 << 30;

/// Why a spool file cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("not a valid spool file: {0}")]
pub(crate) struct Corrupt(pub(crate) String);

/// The file's bytes.
pub(crate) fn encode(batch: &SpooledBatch) -> Vec<u8> {
    let header = serde_json::to_vec(&Header {
        batch_id: batch.batch_id.clone(),
        start_unix_nanos: batch.start_unix_nanos,
        end_unix_nanos: batch.end_unix_nanos,
        requests: batch.requests.len() as u32,
    })
    .expect("a struct of strings and integers serializes");
    let mut out = Vec::with_capacity(64 + batch.requests.iter().map(Vec::len).sum::<usize>() / 4);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&(header.len() as u32).to_le_bytes());
    out.extend_from_slice(&header);
    // Fast level: spooling happens while the backend is failing, and replay decompresses once.
    let mut gz = GzEncoder::new(out, Compression::fast());
    for request in &batch.requests {
        gz.write_all(&(request.len() as u32).to_le_bytes())
            .and_then(|()| gz.write_all(request))
            .expect("gzip into memory");
    }
    let mut out = gz.finish().expect("gzip into memory");
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// Checks and decodes a file's bytes.
pub(crate) fn decode(bytes: &[u8]) -> Result<SpooledBatch, Corrupt> {
    let bad = |why: &str| Corrupt(why.to_owned());
    if bytes.len() < MAGIC.len() + 12 || &bytes[..MAGIC.len()] != MAGIC {
        return Err(bad("no SONDESPL magic"));
    }
    let (data, crc) = bytes.split_at(bytes.len() - 4);
    if crc32fast::hash(data) != u32::from_le_bytes(crc.try_into().expect("4 bytes")) {
        return Err(bad("checksum mismatch (torn or damaged)"));
    }
    let word = |at: usize| u32::from_le_bytes(data[at..at + 4].try_into().expect("4 bytes"));
    if word(8) != VERSION {
        return Err(Corrupt(format!("version {} (this sonde reads 1)", word(8))));
    }
    let header_len = word(12) as usize;
    let body_at = 16 + header_len;
    if header_len > MAX_HEADER || body_at > data.len() {
        return Err(bad("header length out of range"));
    }
    let header: Header =
        serde_json::from_slice(&data[16..body_at]).map_err(|e| Corrupt(format!("header: {e}")))?;
    let mut body = Vec::new();
    GzDecoder::new(&data[body_at..])
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
        .map_err(|e| Corrupt(format!("body: {e}")))?;
    if body.len() as u64 > MAX_BODY {
        return Err(bad("body larger than 1 GiB"));
    }
    let mut requests = Vec::with_capacity(header.requests as usize);
    let mut rest = body.as_slice();
    while !rest.is_empty() {
        let Some((len, tail)) = rest.split_first_chunk::<4>() else {
            return Err(bad("truncated request length"));
        };
        let len = u32::from_le_bytes(*len) as usize;
        if len > tail.len() {
            return Err(bad("truncated request"));
        }
        requests.push(tail[..len].to_vec());
        rest = &tail[len..];
    }
    if requests.len() != header.requests as usize {
        return Err(bad("request count differs from the header"));
    }
    Ok(SpooledBatch {
        batch_id: header.batch_id,
        start_unix_nanos: header.start_unix_nanos,
        end_unix_nanos: header.end_unix_nanos,
        requests,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> SpooledBatch {
        SpooledBatch {
            batch_id: "00000000deadbeef-3".into(),
            start_unix_nanos: 10,
            end_unix_nanos: 20,
            requests: vec![b"first request".to_vec(), Vec::new(), vec![7; 70_000]],
        }
    }

    /// The fuzz target's seed (`fuzz/corpus/spool_file/`) is a file this encoder wrote (rewritten when
    /// `SONDE_WRITE_FUZZ_SEED` is set, after a format change).
    #[test]
    fn the_fuzz_seed_is_a_spool_file_sonde_wrote() {
        let seed = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fuzz/corpus/spool_file/sonde-written"
        );
        if std::env::var_os("SONDE_WRITE_FUZZ_SEED").is_some() {
            std::fs::write(seed, encode(&sample())).unwrap();
        }
        assert_eq!(decode(&std::fs::read(seed).unwrap()).unwrap(), sample());
    }

    #[test]
    fn a_file_round_trips() {
        assert_eq!(decode(&encode(&sample())).unwrap(), sample());
    }

    #[test]
    fn every_flipped_byte_and_every_truncation_is_caught() {
        let bytes = encode(&sample());
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(decode(&bad).is_err(), "flip at {i} went unnoticed");
        }
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "truncation to {len}");
        }
    }
}
