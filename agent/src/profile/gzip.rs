//! gzip of the encoded profiles, with one compressor per thread reused for every profile.
//!
//! A daemon's window is one profile per process, most of them small (under a KiB with 1,000
//! services): a fresh deflate state (a few hundred KiB allocated and cleared) cost three times the
//! compression itself, so the state is reset, not rebuilt. The output is an ordinary single-member
//! gzip file (RFC 1952): the same bytes `flate2::write::GzEncoder` writes at the same level.

use std::cell::RefCell;

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// gzip's member header: magic, deflate, no flags, no mtime, no extra flags, OS unknown.
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

thread_local! {
    static COMPRESSOR: RefCell<Compress> = RefCell::new(Compress::new(Compression::default(), false));
}

/// `bytes` as a gzip file.
pub(crate) fn compress(bytes: &[u8]) -> Vec<u8> {
    // Stored blocks are the worst case: 5 bytes per 16 KiB block, plus the frame.
    let mut out = Vec::with_capacity(HEADER.len() + bytes.len() + bytes.len() / 16_384 * 5 + 64);
    out.extend_from_slice(&HEADER);
    COMPRESSOR.with_borrow_mut(|c| {
        c.reset();
        loop {
            let done = c.total_in() as usize;
            let status = c
                .compress_vec(&bytes[done..], &mut out, FlushCompress::Finish)
                .expect("deflate of a buffer in memory");
            if status == Status::StreamEnd {
                break;
            }
            // Out of room: more, and go on from where the input stopped.
            out.reserve(out.capacity().max(256));
        }
    });
    let mut crc = Crc::new();
    crc.update(bytes);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE: the input's length modulo 2^32.
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use std::io::{Read as _, Write as _};

    use super::*;

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(bytes)
            .read_to_end(&mut out)
            .expect("a valid gzip file");
        out
    }

    #[test]
    fn the_same_bytes_as_a_fresh_encoder_for_every_input_in_turn() {
        // Empty, tiny, compressible and incompressible inputs, larger than the first output guess,
        // through one reused compressor.
        let mut noise = Vec::new();
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..300_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            noise.push(x as u8);
        }
        let inputs: Vec<Vec<u8>> = vec![
            Vec::new(),
            b"pprof".to_vec(),
            b"abc".repeat(100_000),
            noise,
            b"again".to_vec(),
        ];
        for input in &inputs {
            let ours = compress(input);
            let mut theirs = flate2::write::GzEncoder::new(Vec::new(), Compression::default());
            theirs.write_all(input).unwrap();
            assert_eq!(ours, theirs.finish().unwrap(), "{} bytes", input.len());
            assert_eq!(&gunzip(&ours), input);
        }
    }
}
