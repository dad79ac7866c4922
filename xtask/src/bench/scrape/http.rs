//! Just enough HTTP/1.1 and exposition-format reading for the scrape section: one GET per connection
//! over std's `TcpStream` (what a scraper costs the agent is the point, so no client library's
//! pooling or compression gets in between), and the few values read from a scrape body.

use std::{
    io::{Read as _, Write as _},
    net::{SocketAddr, TcpStream},
    time::Duration,
};

use anyhow::{Context as _, bail};

/// Bound of one request, connect to last byte: a stuck agent fails the section instead of hanging it.
const TIMEOUT: Duration = Duration::from_secs(10);

/// `Accept` of a Prometheus server that prefers OpenMetrics (what makes sonde answer in it).
pub(super) const OPENMETRICS_ACCEPT: &str = "application/openmetrics-text;version=1.0.0";

/// A response: its status code and body.
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) body: String,
}

/// `GET path` on a fresh connection (`Connection: close`), with `accept` as `Accept` if given.
pub(super) fn get(addr: SocketAddr, path: &str, accept: Option<&str>) -> anyhow::Result<Response> {
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT)
        .with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    let accept = accept
        .map(|a| format!("Accept: {a}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{accept}Connection: close\r\n\r\n"
    )?;
    let mut raw = Vec::new();
    stream
        .read_to_end(&mut raw)
        .with_context(|| format!("reading the answer to GET {path}"))?;
    parse(&raw).with_context(|| format!("GET {path}"))
}

/// Splits a raw HTTP/1.1 response into status and body (sized by Content-Length, chunked, or to EOF).
fn parse(raw: &[u8]) -> anyhow::Result<Response> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("no end of headers")?;
    let head = std::str::from_utf8(&raw[..end]).context("headers are not UTF-8")?;
    let rest = &raw[end + 4..];
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .context("no status line")?;
    let header = |name: &str| {
        head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim().eq_ignore_ascii_case(name).then(|| v.trim())
        })
    };
    let body = if header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)?
    } else if let Some(len) = header("content-length") {
        let len: usize = len.parse().context("bad Content-Length")?;
        if rest.len() < len {
            bail!("body cut short: {} of {len} bytes", rest.len());
        }
        rest[..len].to_vec()
    } else {
        rest.to_vec()
    };
    Ok(Response {
        status,
        body: String::from_utf8(body).context("body is not UTF-8")?,
    })
}

/// The body of a chunked transfer (`size-in-hex\r\n data\r\n ... 0\r\n\r\n`).
fn dechunk(mut rest: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("chunk size line not ended")?;
        let size_line = std::str::from_utf8(&rest[..eol])?;
        // Chunk extensions (`;name=value`) carry nothing we need.
        let size = usize::from_str_radix(size_line.split(';').next().unwrap_or("").trim(), 16)
            .context("bad chunk size")?;
        rest = &rest[eol + 2..];
        if size == 0 {
            return Ok(out);
        }
        if rest.len() < size + 2 {
            bail!("chunk cut short");
        }
        out.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}

/// Samples in an exposition body: its lines that are neither comments (`# HELP`, `# EOF`...) nor blank.
pub(super) fn series(body: &str) -> usize {
    body.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .count()
}

/// Samples of the metric family `name` (with any labels) in a body.
pub(super) fn family_series(body: &str, name: &str) -> usize {
    body.lines()
        .filter(|l| {
            l.strip_prefix(name)
                .is_some_and(|rest| rest.starts_with('{') || rest.starts_with(' '))
        })
        .count()
}

/// The value of the sample written exactly as `sample` (name and labels), e.g.
/// `sonde_processes{state="seen"}`; a label-less name also matches prometheus-client's `name{}`.
pub(super) fn value(body: &str, sample: &str) -> Option<f64> {
    body.lines().find_map(|l| {
        let rest = l.strip_prefix(sample)?;
        rest.strip_prefix("{}")
            .unwrap_or(rest)
            .strip_prefix(' ')?
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_are_read_by_length_by_chunks_and_to_the_end() {
        let sized = parse(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabcdef").unwrap();
        assert_eq!((sized.status, sized.body.as_str()), (200, "abc"));
        let chunked =
            parse(b"HTTP/1.1 503 X\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;x=y\r\nde\r\n0\r\n\r\n")
                .unwrap();
        assert_eq!((chunked.status, chunked.body.as_str()), (503, "abcde"));
        let open = parse(b"HTTP/1.0 200 OK\r\n\r\nall of it").unwrap();
        assert_eq!(open.body, "all of it");
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc").is_err());
    }

    #[test]
    fn samples_are_counted_and_read_by_exact_name_and_labels() {
        let body = "# HELP sonde_processes P.\n# TYPE sonde_processes gauge\n\
                    sonde_processes{state=\"seen\"} 1012\nsonde_processes{state=\"sampled\"} 640\n\
                    sonde_processes_other 3\nsonde_windows_total{} 7 1700000000\nsonde_live 1\n# EOF\n";
        assert_eq!(series(body), 5);
        assert_eq!(family_series(body, "sonde_processes"), 2);
        assert_eq!(
            value(body, "sonde_processes{state=\"sampled\"}"),
            Some(640.0)
        );
        assert_eq!(value(body, "sonde_windows_total"), Some(7.0));
        assert_eq!(value(body, "sonde_live"), Some(1.0));
        assert_eq!(value(body, "sonde_processes"), None);
    }
}
