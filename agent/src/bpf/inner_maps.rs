//! Inner maps of the unwind tables' map-in-maps (`UNWIND_ROWS`, `UNWIND_PAGES`), created the way the
//! kernel will accept in place of their templates on every kernel sonde supports.
//!
//! The kernel puts a map in an outer slot only if it matches the template the outer map was created
//! with. The object's templates carry BTF (they are BTF map definitions), and Linux 5.15 to 6.1
//! compare a field derived from it: the value's timer offset, `-ENOENT` for a struct without a timer
//! but `-EINVAL` for a map created without BTF, as aya's `create` makes them. On those kernels (Debian
//! 12's 6.1, Amazon Linux 2023, Ubuntu 22.04's HWE) every update of the outer slot failed with
//! `EINVAL`; from 6.2 the comparison treats both as "no special fields". So each inner map is created
//! here with BTF of its own: a struct value of the right size with no timer (what the template's is,
//! to the kernel), and the key type the map type requires. Harmless on every kernel.

use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd};

use aya::maps::{Array, HashMap, Map, MapData, MapError};

use super::batch::bpf;

/// `bpf(2)` commands (`include/uapi/linux/bpf.h`).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_BTF_LOAD: libc::c_long = 18;
/// Map types (`enum bpf_map_type`).
const BPF_MAP_TYPE_HASH: u32 = 1;
const BPF_MAP_TYPE_ARRAY: u32 = 2;

/// BTF kinds (`include/uapi/linux/btf.h`).
const BTF_KIND_INT: u32 = 1;
const BTF_KIND_ARRAY: u32 = 3;
const BTF_KIND_STRUCT: u32 = 4;

/// The `map_create` member of `union bpf_attr`, up to the BTF type ids, every byte a field: the
/// kernel refuses an attribute whose bytes past what it reads are not zero, and padding is not.
#[repr(C, align(8))]
#[derive(Default)]
struct MapCreateAttr {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
    map_ifindex: u32,
    btf_fd: u32,
    btf_key_type_id: u32,
    btf_value_type_id: u32,
    btf_vmlinux_value_type_id: u32,
}

/// The `btf_load` member of `union bpf_attr`.
#[repr(C, align(8))]
#[derive(Default)]
struct BtfLoadAttr {
    btf: u64,
    btf_log_buf: u64,
    btf_size: u32,
    btf_log_size: u32,
    btf_log_level: u32,
    btf_log_true_size: u32,
}

/// A hash of `K` to `V` that the kernel accepts in place of `UNWIND_PAGES`' template.
pub(crate) fn hash<K: aya::Pod, V: aya::Pod>(
    max_entries: u32,
    flags: u32,
) -> Result<HashMap<MapData, K, V>, MapError> {
    let map = create(
        BPF_MAP_TYPE_HASH,
        KeyType::Struct(size_of::<K>() as u32),
        size_of::<V>() as u32,
        max_entries,
        flags,
        "sonde_pages",
    )?;
    HashMap::try_from(Map::HashMap(map))
}

/// An array of `V` that the kernel accepts in place of `UNWIND_ROWS`' template.
pub(crate) fn array<V: aya::Pod>(max_entries: u32) -> Result<Array<MapData, V>, MapError> {
    let map = create(
        BPF_MAP_TYPE_ARRAY,
        KeyType::U32,
        size_of::<V>() as u32,
        max_entries,
        0,
        "sonde_rows",
    )?;
    Array::try_from(Map::Array(map))
}

/// The key's BTF type: arrays require a 32-bit integer, hashes take any type of the key's size.
#[derive(Clone, Copy)]
enum KeyType {
    U32,
    Struct(u32),
}

fn create(
    map_type: u32,
    key: KeyType,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    name: &str,
) -> Result<MapData, MapError> {
    let key_size = match key {
        KeyType::U32 => 4,
        KeyType::Struct(size) => size,
    };
    let blob = Btf::for_map(key, value_size);
    let btf = load_btf(&blob.bytes).map_err(|io_error| syscall("BPF_BTF_LOAD", io_error))?;
    let mut attr = MapCreateAttr {
        map_type,
        key_size,
        value_size,
        max_entries,
        map_flags,
        btf_fd: btf.as_raw_fd() as u32,
        btf_key_type_id: blob.key_id,
        btf_value_type_id: blob.value_id,
        ..MapCreateAttr::default()
    };
    let len = name.len().min(attr.map_name.len() - 1);
    attr.map_name[..len].copy_from_slice(&name.as_bytes()[..len]);
    let fd = new_fd(BPF_MAP_CREATE, &mut attr)
        .map_err(|io_error| syscall("BPF_MAP_CREATE", io_error))?;
    // The map holds its own reference to the BTF: this descriptor may close.
    drop(btf);
    MapData::from_fd(fd)
}

fn syscall(call: &'static str, io_error: std::io::Error) -> MapError {
    MapError::SyscallError(aya::sys::SyscallError { call, io_error })
}

fn load_btf(bytes: &[u8]) -> std::io::Result<OwnedFd> {
    let mut attr = BtfLoadAttr {
        btf: bytes.as_ptr() as u64,
        btf_size: bytes.len() as u32,
        ..BtfLoadAttr::default()
    };
    new_fd(BPF_BTF_LOAD, &mut attr)
}

/// Runs a `bpf(2)` command that returns a new descriptor.
fn new_fd<A>(command: libc::c_long, attr: &mut A) -> std::io::Result<OwnedFd> {
    // SAFETY: both attributes used here are their command's layout, and their one pointer (the BTF
    // blob) outlives the call.
    let fd = unsafe { bpf(command, attr) }?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A BTF blob describing one map's key and value.
struct Btf {
    bytes: Vec<u8>,
    key_id: u32,
    value_id: u32,
}

impl Btf {
    /// Types: 1 `u8`, 2 `u32`, 3 `u8[value_size]`, 4 `struct value { u8 bytes[value_size]; }`, and
    /// for a struct key 5 `u8[key_size]`, 6 `struct key { u8 bytes[key_size]; }`.
    fn for_map(key: KeyType, value_size: u32) -> Self {
        // Names, each NUL-terminated, at their offsets in the string section.
        const STRINGS: &[u8] = b"\0u8\0u32\0value\0key\0bytes\0";
        const U8: u32 = 1;
        const U32: u32 = 4;
        const VALUE: u32 = 8;
        const KEY: u32 = 14;
        const BYTES: u32 = 18;
        let mut types = Vec::new();
        let mut put = |words: &[u32]| {
            for w in words {
                types.extend_from_slice(&w.to_ne_bytes());
            }
        };
        let info = |kind: u32, vlen: u32| (kind << 24) | vlen;
        // 1: u8, 2: u32 (encoding 0, offset 0, bits).
        put(&[U8, info(BTF_KIND_INT, 0), 1, 8]);
        put(&[U32, info(BTF_KIND_INT, 0), 4, 32]);
        // 3: u8[value_size] (element type, index type, count), 4: the value struct.
        put(&[0, info(BTF_KIND_ARRAY, 0), 0, 1, 2, value_size]);
        put(&[VALUE, info(BTF_KIND_STRUCT, 1), value_size, BYTES, 3, 0]);
        let key_id = match key {
            KeyType::U32 => 2,
            KeyType::Struct(size) => {
                put(&[0, info(BTF_KIND_ARRAY, 0), 0, 1, 2, size]);
                put(&[KEY, info(BTF_KIND_STRUCT, 1), size, BYTES, 5, 0]);
                6
            }
        };
        // The header (`struct btf_header`): magic, version 1, no flags, its own length, then the
        // type and string sections' offsets and lengths after it.
        let header_len = 24u32;
        let mut bytes = Vec::with_capacity(header_len as usize + types.len() + STRINGS.len());
        bytes.extend_from_slice(&0xeb9f_u16.to_ne_bytes());
        bytes.extend_from_slice(&[1, 0]);
        for word in [
            header_len,
            0,
            types.len() as u32,
            types.len() as u32,
            STRINGS.len() as u32,
        ] {
            bytes.extend_from_slice(&word.to_ne_bytes());
        }
        bytes.extend_from_slice(&types);
        bytes.extend_from_slice(STRINGS);
        Self {
            bytes,
            key_id,
            value_id: 4,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The name at offset `at` of the blob's string section.
    fn name(blob: &Btf, at: u32) -> String {
        let word = |at: usize| u32::from_ne_bytes(blob.bytes[at..at + 4].try_into().unwrap());
        let (types, strings) = (word(12) as usize, word(20) as usize);
        let section = &blob.bytes[24 + types..24 + types + strings];
        let rest = &section[at as usize..];
        let end = rest.iter().position(|b| *b == 0).unwrap();
        String::from_utf8(rest[..end].to_vec()).unwrap()
    }

    #[test]
    fn every_type_and_member_is_named_by_its_own_name() {
        let blob = Btf::for_map(KeyType::Struct(8), 4096);
        let word = |at: usize| u32::from_ne_bytes(blob.bytes[at..at + 4].try_into().unwrap());
        assert_eq!(24 + word(12) + word(20), blob.bytes.len() as u32);
        // Type records from byte 24: name, info, size, then per kind.
        let mut at = 24;
        let mut names = Vec::new();
        for _ in 0..6 {
            let (name_off, info) = (word(at), word(at + 4));
            names.push(name(&blob, name_off));
            at += 12;
            match info >> 24 {
                BTF_KIND_INT => at += 4,
                BTF_KIND_ARRAY => at += 12,
                BTF_KIND_STRUCT => {
                    names.push(name(&blob, word(at)));
                    at += 12;
                }
                kind => panic!("kind {kind}"),
            }
        }
        assert_eq!(
            names,
            ["u8", "u32", "", "value", "bytes", "", "key", "bytes"]
        );
        assert_eq!((blob.key_id, blob.value_id), (6, 4));
        assert_eq!(Btf::for_map(KeyType::U32, 16).key_id, 2);
    }

    #[test]
    fn the_kernel_takes_both_kinds_of_inner_map() {
        // SAFETY: geteuid has no preconditions.
        assert_eq!(unsafe { libc::geteuid() }, 0, "creating maps needs root");
        let hash = hash::<u64, u64>(16, 1).expect("a BTF-typed hash");
        let mut array = array::<[u8; 64]>(4).expect("a BTF-typed array");
        array.set(3, [7; 64], 0).unwrap();
        assert_eq!(array.get(&3, 0).unwrap(), [7; 64]);
        drop(hash);
    }
}
