//! Parser for `/proc/PID/maps` lines.

/// One line of `/proc/PID/maps`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapsLine {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// Whether the mapping is executable.
    pub executable: bool,
    /// File offset of `start`.
    pub offset: u64,
    /// Path or pseudo name (`[vdso]`); empty for anonymous memory. ` (deleted)` is stripped.
    pub path: String,
}

/// Parses the whole file; malformed lines are skipped.
pub fn parse_maps(text: &str) -> Vec<MapsLine> {
    text.lines().filter_map(parse_line).collect()
}

fn parse_line(line: &str) -> Option<MapsLine> {
    let mut fields = line.splitn(6, ' ');
    let (start, end) = fields.next()?.split_once('-')?;
    let perms = fields.next()?;
    let offset = fields.next()?;
    let _dev = fields.next()?;
    let _inode = fields.next()?;
    let path = fields.next().unwrap_or("").trim_start();
    Some(MapsLine {
        start: u64::from_str_radix(start, 16).ok()?,
        end: u64::from_str_radix(end, 16).ok()?,
        executable: perms.as_bytes().get(2) == Some(&b'x'),
        offset: u64::from_str_radix(offset, 16).ok()?,
        path: path.strip_suffix(" (deleted)").unwrap_or(path).to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_file_backed_anonymous_and_deleted_lines() {
        let text = "\
55d0c8a00000-55d0c8a01000 r--p 00000000 fe:01 1234                       /usr/bin/cat
55d0c8a01000-55d0c8a05000 r-xp 00001000 fe:01 1234                       /usr/bin/cat
7f1e2c000000-7f1e2c021000 rw-p 00000000 00:00 0 
7ffd5e9f2000-7ffd5e9f4000 r-xp 00000000 00:00 0                          [vdso]
7f00aa000000-7f00aa100000 r-xp 00002000 fe:01 99                         /tmp/my app (deleted)
";
        let maps = parse_maps(text);
        assert_eq!(maps.len(), 5);
        assert_eq!(
            maps[1],
            MapsLine {
                start: 0x55d0c8a01000,
                end: 0x55d0c8a05000,
                executable: true,
                offset: 0x1000,
                path: "/usr/bin/cat".into()
            }
        );
        assert!(!maps[0].executable);
        assert_eq!(maps[2].path, "");
        assert_eq!(maps[3].path, "[vdso]");
        assert_eq!(maps[4].path, "/tmp/my app");
    }
}
