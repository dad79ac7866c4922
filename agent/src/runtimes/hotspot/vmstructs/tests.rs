//! A fake libjvm's tables in this process's memory: what is read, and what untrusted tables are
//! refused for.

use std::{collections::BTreeMap, ffi::CString};

use super::*;

/// Entry layouts as HotSpot's (JDK 17) structs have them.
const STRUCT_STRIDE: u64 = 48;
const TYPE_STRIDE: u64 = 48;
const CONST_STRIDE: u64 = 16;

/// A fake libjvm in this process's memory: the tables, their strings, and the exported
/// variables (at absolute addresses: bias 0).
struct Fake {
    strings: Vec<CString>,
    structs: Vec<u64>,
    types: Vec<u64>,
    ints: Vec<u64>,
    longs: Vec<u64>,
    /// The exported variables' values, in a stable place.
    vars: Box<[u64; 24]>,
    symbols: HotspotSymbols,
}

const VARS: [(&str, u64); 20] = [
    ("gHotSpotVMStructEntryArrayStride", STRUCT_STRIDE),
    ("gHotSpotVMStructEntryTypeNameOffset", 0),
    ("gHotSpotVMStructEntryFieldNameOffset", 8),
    ("gHotSpotVMStructEntryTypeStringOffset", 16),
    ("gHotSpotVMStructEntryIsStaticOffset", 24),
    ("gHotSpotVMStructEntryOffsetOffset", 32),
    ("gHotSpotVMStructEntryAddressOffset", 40),
    ("gHotSpotVMTypeEntryArrayStride", TYPE_STRIDE),
    ("gHotSpotVMTypeEntryTypeNameOffset", 0),
    ("gHotSpotVMTypeEntrySuperclassNameOffset", 8),
    ("gHotSpotVMTypeEntryIsOopTypeOffset", 16),
    ("gHotSpotVMTypeEntryIsIntegerTypeOffset", 20),
    ("gHotSpotVMTypeEntryIsUnsignedOffset", 24),
    ("gHotSpotVMTypeEntrySizeOffset", 32),
    ("gHotSpotVMIntConstantEntryArrayStride", CONST_STRIDE),
    ("gHotSpotVMIntConstantEntryNameOffset", 0),
    ("gHotSpotVMIntConstantEntryValueOffset", 8),
    ("gHotSpotVMLongConstantEntryArrayStride", CONST_STRIDE),
    ("gHotSpotVMLongConstantEntryNameOffset", 0),
    ("gHotSpotVMLongConstantEntryValueOffset", 8),
];

impl Fake {
    fn new() -> Self {
        Self {
            strings: Vec::new(),
            structs: Vec::new(),
            types: Vec::new(),
            ints: Vec::new(),
            longs: Vec::new(),
            vars: Box::new([0; 24]),
            symbols: HotspotSymbols::default(),
        }
    }

    fn s(&mut self, s: &str) -> u64 {
        let c = CString::new(s).unwrap();
        let p = c.as_ptr() as u64;
        self.strings.push(c);
        p
    }

    fn field(&mut self, ty: &str, field: &str, place: Field) {
        let (t, f) = (self.s(ty), self.s(field));
        let (is_static, off, addr) = match place {
            Field::Offset(o) => (0, o, 0),
            Field::Static(a) => (1, 0, a),
        };
        self.structs.extend([t, f, 0, is_static, off, addr]);
    }

    fn ty(&mut self, ty: &str, size: u64) {
        let t = self.s(ty);
        self.types.extend([t, 0, 0, 0, size, 0]);
    }

    fn int(&mut self, name: &str, value: i32) {
        let n = self.s(name);
        self.ints.extend([n, value as u32 as u64]);
    }

    fn long(&mut self, name: &str, value: u64) {
        let n = self.s(name);
        self.longs.extend([n, value]);
    }

    /// Ends the tables and publishes the variables.
    fn finish(&mut self) -> &HotspotSymbols {
        self.structs.extend([0; 6]);
        self.types.extend([0; 6]);
        self.ints.extend([0; 2]);
        self.longs.extend([0; 2]);
        let tables = [
            self.structs.as_ptr() as u64,
            self.types.as_ptr() as u64,
            self.ints.as_ptr() as u64,
            self.longs.as_ptr() as u64,
        ];
        let mut by_name = BTreeMap::new();
        for (i, (name, value)) in HotspotSymbols::TABLES
            .into_iter()
            .zip(tables)
            .chain(VARS)
            .enumerate()
        {
            self.vars[i] = value;
            by_name.insert(name.to_owned(), &self.vars[i] as *const u64 as u64);
        }
        self.symbols = HotspotSymbols { by_name };
        &self.symbols
    }
}

fn me() -> ProcessMemory {
    ProcessMemory::new(std::process::id())
}

#[test]
fn reads_fields_statics_types_and_constants() {
    let mut fake = Fake::new();
    fake.field("CodeBlob", "_name", Field::Offset(96));
    fake.field("CodeCache", "_heaps", Field::Static(0x7f00_1234_5678));
    fake.field("CodeBlob", "_frame_size", Field::Offset(28));
    // A duplicate keeps the first entry, as HotSpot's own look-ups do.
    fake.field("CodeBlob", "_name", Field::Offset(1));
    fake.ty("HeapBlock", 16);
    fake.int("ConstMethod::_has_linenumber_table", 1);
    fake.int("frame::interpreter_frame_last_sp_offset", -2);
    fake.long("markWord::hash_mask", u64::MAX >> 33);
    let symbols = fake.finish();
    let vms = VmStructs::read(&me(), symbols, 0).unwrap();
    assert_eq!(vms.offset("CodeBlob", "_name"), Some(96));
    assert_eq!(vms.offset("CodeBlob", "_frame_size"), Some(28));
    assert_eq!(vms.address("CodeCache", "_heaps"), Some(0x7f00_1234_5678));
    assert_eq!(vms.offset("CodeCache", "_heaps"), None, "static");
    assert_eq!(vms.address("CodeBlob", "_name"), None, "member");
    assert_eq!(vms.size("HeapBlock"), Some(16));
    assert_eq!(vms.size("nmethod"), None);
    assert_eq!(vms.int("ConstMethod::_has_linenumber_table"), Some(1));
    assert_eq!(vms.int("frame::interpreter_frame_last_sp_offset"), Some(-2));
    assert_eq!(vms.long("markWord::hash_mask"), Some(u64::MAX >> 33));
    assert_eq!(vms.counts(), (3, 1, 2, 1));
}

#[test]
fn untrusted_tables_are_refused_not_followed() {
    // A stride beyond any real entry.
    let mut fake = Fake::new();
    fake.field("A", "_a", Field::Offset(0));
    fake.finish();
    fake.vars[4] = 4096;
    let err = VmStructs::read(&me(), &fake.symbols, 0).unwrap_err();
    assert!(matches!(err, VmStructsError::Implausible { .. }), "{err}");

    // A table whose pointer is still null: not set up yet.
    let mut fake = Fake::new();
    fake.finish();
    fake.vars[0] = 0;
    let err = VmStructs::read(&me(), &fake.symbols, 0).unwrap_err();
    assert!(matches!(err, VmStructsError::NotReady), "{err}");

    // A name without an end within the bound.
    let mut fake = Fake::new();
    let long = "x".repeat(MAX_NAME + 1);
    fake.field(&long, "_a", Field::Offset(0));
    let err = VmStructs::read(&me(), fake.finish(), 0).unwrap_err();
    assert!(err.to_string().contains("longer than 256"), "{err}");

    // A table without an end: read up to the bound, then refused.
    let mut fake = Fake::new();
    let name = fake.s("T");
    fake.types = [name, 0, 0, 0, 8, 0].repeat(MAX_ENTRIES + 1);
    let symbols = fake.finish().clone();
    // The terminator appended by `finish` lies past the bound.
    let err = VmStructs::read(&me(), &symbols, 0).unwrap_err();
    assert!(err.to_string().contains("no end"), "{err}");

    // An unmapped table.
    let mut fake = Fake::new();
    fake.finish();
    fake.vars[1] = 0x10;
    let err = VmStructs::read(&me(), &fake.symbols, 0).unwrap_err();
    assert!(matches!(err, VmStructsError::Memory { .. }), "{err}");

    // A variable the library does not export.
    let mut fake = Fake::new();
    fake.ty("T", 8);
    let mut symbols = fake.finish().clone();
    symbols.by_name.remove("gHotSpotVMTypeEntrySizeOffset");
    let err = VmStructs::read(&me(), &symbols, 0).unwrap_err();
    assert!(
        matches!(
            err,
            VmStructsError::Missing {
                name: "gHotSpotVMTypeEntrySizeOffset"
            }
        ),
        "{err}"
    );
}

#[test]
fn strings_end_at_their_nul_even_before_unmapped_memory() {
    let mem = me();
    let s = CString::new("CodeHeap").unwrap();
    assert_eq!(c_string(&mem, s.as_ptr() as u64, 8).unwrap(), "CodeHeap");
    assert!(c_string(&mem, s.as_ptr() as u64, 7).is_err());
    let odd = CString::new(vec![0xc3u8, 0xa9]).unwrap();
    assert!(c_string(&mem, odd.as_ptr() as u64, 8).is_err());
    // A string in the last bytes of a mapping, followed by unmapped memory.
    // SAFETY: a fresh anonymous mapping of two pages, the second unmapped again; only read.
    unsafe {
        let p = libc::mmap(
            std::ptr::null_mut(),
            8192,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
        .cast::<u8>();
        assert!(!p.is_null());
        libc::munmap(p.add(4096).cast(), 4096);
        let at = p.add(4096 - 4);
        at.copy_from(c"abc".as_ptr().cast(), 4);
        assert_eq!(c_string(&mem, at as u64, MAX_NAME).unwrap(), "abc");
        at.copy_from(b"abcd".as_ptr(), 4);
        assert!(matches!(
            c_string(&mem, at as u64, MAX_NAME),
            Err(VmStructsError::Memory { .. })
        ));
        libc::munmap(p.cast(), 4096);
    }
}
