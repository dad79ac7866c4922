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

/// The level of a window's pack (`crate::datadir`): one stream of a window's profiles, written every
/// window on every host. On the scrape bench's 665 profiles (500 KB) level 2 takes 1.3 ms for 64 KB,
/// the default level 4 ms for 59 KB: a third of the time for 9% more bytes.
pub(crate) const PACK_LEVEL: u32 = 2;

thread_local! {
    static COMPRESSOR: RefCell<Compress> = RefCell::new(Compress::new(Compression::default(), false));
    static PACK_COMPRESSOR: RefCell<Compress> =
        RefCell::new(Compress::new(Compression::new(PACK_LEVEL), false));
}

/// `bytes` as a gzip file, at the default level.
pub(crate) fn compress(bytes: &[u8]) -> Vec<u8> {
    COMPRESSOR.with_borrow_mut(|c| compress_with(c, bytes))
}

/// `bytes` as a gzip file, at [`PACK_LEVEL`].
pub(crate) fn compress_pack(bytes: &[u8]) -> Vec<u8> {
    PACK_COMPRESSOR.with_borrow_mut(|c| compress_with(c, bytes))
}

fn compress_with(c: &mut Compress, bytes: &[u8]) -> Vec<u8> {
    // Stored blocks are the worst case: 5 bytes per 16 KiB block, plus the frame.
    let mut out = Vec::with_capacity(HEADER.len() + bytes.len() + bytes.len() / 16_384 * 5 + 64);
    out.extend_from_slice(&HEADER);
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
            for (ours, level) in [
                (compress(input), Compression::default()),
                (compress_pack(input), Compression::new(PACK_LEVEL)),
            ] {
                let mut theirs = flate2::write::GzEncoder::new(Vec::new(), level);
                theirs.write_all(input).unwrap();
                assert_eq!(ours, theirs.finish().unwrap(), "{} bytes", input.len());
                assert_eq!(&gunzip(&ours), input);
            }
        }
    }
}
