//! Images and other binary files, recognised by their bytes (never by their name): PNG, JPEG, GIF
//! and WebP with their size read from the header (PNG's IHDR, JPEG's SOF markers, GIF's logical
//! screen descriptor, WebP's VP8/VP8L/VP8X chunks), and a few other kinds named for the one line
//! `read_file` shows instead of a binary file's bytes. Every parser reads only what the header
//! holds and never panics on arbitrary bytes (a property test holds it to that).

/// An image `read_file` sends: at most this many bytes (3.75 MiB)...
pub const MAX_IMAGE_BYTES: u64 = 3_932_160;
/// ...and this many pixels a side.
pub const MAX_IMAGE_SIDE: u32 = 8000;
/// A file with a NUL byte in its first this-many bytes is binary.
pub const BINARY_SNIFF_BYTES: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageKind {
    pub fn media_type(self) -> &'static str {
        match self {
            ImageKind::Png => "image/png",
            ImageKind::Jpeg => "image/jpeg",
            ImageKind::Gif => "image/gif",
            ImageKind::Webp => "image/webp",
        }
    }
}

/// The image kind the bytes are, by their signature.
pub fn sniff(b: &[u8]) -> Option<ImageKind> {
    if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some(ImageKind::Png)
    } else if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some(ImageKind::Jpeg)
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some(ImageKind::Gif)
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some(ImageKind::Webp)
    } else {
        None
    }
}

fn be16(b: &[u8], at: usize) -> Option<u32> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]) as u32)
}

fn le16(b: &[u8], at: usize) -> Option<u32> {
    Some(u16::from_le_bytes([*b.get(at)?, *b.get(at + 1)?]) as u32)
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes([*b.get(at)?, *b.get(at + 1)?, *b.get(at + 2)?, 0]))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes([*b.get(at)?, *b.get(at + 1)?, *b.get(at + 2)?, *b.get(at + 3)?]))
}

/// Width and height from the header; `None` when the header gives none (or is cut short).
pub fn dimensions(kind: ImageKind, b: &[u8]) -> Option<(u32, u32)> {
    let dims = match kind {
        ImageKind::Png => {
            // The first chunk is IHDR: length(4) "IHDR" width(4) height(4).
            if b.get(12..16)? != b"IHDR" {
                return None;
            }
            (be32(b, 16)?, be32(b, 20)?)
        }
        ImageKind::Gif => (le16(b, 6)?, le16(b, 8)?),
        ImageKind::Jpeg => jpeg_dimensions(b)?,
        ImageKind::Webp => match b.get(12..16)? {
            b"VP8 " => {
                // A key frame: start code 9d 01 2a, then 14-bit width and height.
                if b.get(23..26)? != [0x9d, 0x01, 0x2a] {
                    return None;
                }
                (le16(b, 26)? & 0x3fff, le16(b, 28)? & 0x3fff)
            }
            b"VP8L" => {
                if *b.get(20)? != 0x2f {
                    return None;
                }
                let bits = u32::from_le_bytes([*b.get(21)?, *b.get(22)?, *b.get(23)?, *b.get(24)?]);
                ((bits & 0x3fff) + 1, ((bits >> 14) & 0x3fff) + 1)
            }
            b"VP8X" => (le24(b, 24)? + 1, le24(b, 27)? + 1),
            _ => return None,
        },
    };
    (dims.0 > 0 && dims.1 > 0).then_some(dims)
}

/// Walks JPEG's marker segments to the first start-of-frame: height and width follow its
/// precision byte.
fn jpeg_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    let mut i = 2;
    loop {
        // Markers may be padded with extra 0xFF bytes.
        while *b.get(i)? == 0xFF && *b.get(i + 1)? == 0xFF {
            i += 1;
        }
        if *b.get(i)? != 0xFF {
            return None;
        }
        let marker = *b.get(i + 1)?;
        match marker {
            // Standalone markers carry no length.
            0xD8 | 0x01 | 0xD0..=0xD7 => {
                i += 2;
                continue;
            }
            // End of image, or the start of scan data: no frame header before it.
            0xD9 | 0xDA => return None,
            _ => {}
        }
        let len = be16(b, i + 2)? as usize;
        if len < 2 {
            return None;
        }
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            return Some((be16(b, i + 7)?, be16(b, i + 5)?));
        }
        i = i.checked_add(2 + len)?;
    }
}

/// Whether the bytes are binary: a NUL byte among the first 8 KiB.
pub fn is_binary(b: &[u8]) -> bool {
    memchr::memchr(0, &b[..b.len().min(BINARY_SNIFF_BYTES)]).is_some()
}

/// What kind of binary file the bytes are, for the one line shown instead of them.
pub fn binary_kind(b: &[u8]) -> &'static str {
    if let Some(kind) = sniff(b) {
        return kind.media_type();
    }
    const KINDS: [(&[u8], &str); 12] = [
        (b"%PDF-", "application/pdf"),
        (b"PK\x03\x04", "application/zip"),
        (b"\x1f\x8b", "application/gzip"),
        (b"\x7fELF", "an ELF executable"),
        (b"MZ", "a Windows executable"),
        (b"\xca\xfe\xba\xbe", "a Mach-O or Java class file"),
        (b"\xcf\xfa\xed\xfe", "a Mach-O executable"),
        (b"\0asm", "WebAssembly"),
        (b"SQLite format 3\0", "an SQLite database"),
        (b"BZh", "application/x-bzip2"),
        (b"\xfd7zXZ\0", "application/x-xz"),
        (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    ];
    KINDS.iter().find(|(magic, _)| b.starts_with(magic)).map(|(_, kind)| *kind).unwrap_or("binary data")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    pub(crate) fn png(w: u32, h: u32) -> Vec<u8> {
        let mut b = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec();
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
        b
    }

    fn jpeg(w: u16, h: u16) -> Vec<u8> {
        let mut b = vec![0xFF, 0xD8, 0xFF, 0xE0, 0, 16];
        b.extend_from_slice(b"JFIF\0\x01\x01\0\0\x01\0\x01\0\0");
        b.extend_from_slice(&[0xFF, 0xC0, 0, 17, 8]);
        b.extend_from_slice(&h.to_be_bytes());
        b.extend_from_slice(&w.to_be_bytes());
        b.extend_from_slice(&[3, 1, 0x22, 0, 2, 0x11, 1, 3, 0x11, 1]);
        b
    }

    #[test]
    fn each_kind_is_recognised_by_its_bytes_with_its_size() {
        assert_eq!(sniff(&png(640, 480)), Some(ImageKind::Png));
        assert_eq!(dimensions(ImageKind::Png, &png(640, 480)), Some((640, 480)));
        assert_eq!(dimensions(ImageKind::Jpeg, &jpeg(1024, 768)), Some((1024, 768)));
        let gif = b"GIF89a\x20\x03\x58\x02\xf7\0\0".to_vec();
        assert_eq!(sniff(&gif), Some(ImageKind::Gif));
        assert_eq!(dimensions(ImageKind::Gif, &gif), Some((800, 600)));
        let mut vp8x = b"RIFF\0\0\0\0WEBPVP8X\x0a\0\0\0\x10\0\0\0".to_vec();
        vp8x.extend_from_slice(&[0x1f, 0x03, 0x00, 0xdf, 0x01, 0x00]);
        assert_eq!(sniff(&vp8x), Some(ImageKind::Webp));
        assert_eq!(dimensions(ImageKind::Webp, &vp8x), Some((800, 480)));
        let mut vp8l = b"RIFF\0\0\0\0WEBPVP8L\0\0\0\0\x2f".to_vec();
        let bits: u32 = (99) | (49 << 14);
        vp8l.extend_from_slice(&bits.to_le_bytes());
        assert_eq!(dimensions(ImageKind::Webp, &vp8l), Some((100, 50)));
        let mut vp8 = b"RIFF\0\0\0\0WEBPVP8 \0\0\0\0\0\0\0\x9d\x01\x2a".to_vec();
        vp8.extend_from_slice(&[0x40, 0x01, 0xf0, 0x00]);
        assert_eq!(dimensions(ImageKind::Webp, &vp8), Some((320, 240)));
    }

    #[test]
    fn a_truncated_header_gives_no_size() {
        let p = png(10, 10);
        for cut in 0..24 {
            assert_eq!(dimensions(ImageKind::Png, &p[..cut]), None, "{cut}");
        }
        let j = jpeg(10, 10);
        for cut in 0..j.len() - 10 {
            assert_eq!(dimensions(ImageKind::Jpeg, &j[..cut]), None, "{cut}");
        }
    }

    #[test]
    fn binary_files_are_named_by_their_kind() {
        assert_eq!(binary_kind(b"%PDF-1.7\n\0"), "application/pdf");
        assert_eq!(binary_kind(b"\x7fELF\x02\x01"), "an ELF executable");
        assert_eq!(binary_kind(b"\0\0\0"), "binary data");
        assert!(is_binary(b"abc\0def"));
        assert!(!is_binary(b"plain text"));
        let mut late = vec![b'a'; BINARY_SNIFF_BYTES];
        late.push(0);
        assert!(!is_binary(&late), "only the first 8 KiB are looked at");
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(5000))]
        #[test]
        fn sniffing_and_size_parsing_never_panic_on_arbitrary_bytes(
            tail in proptest::collection::vec(any::<u8>(), 0..64),
            which in 0usize..5,
        ) {
            let heads: [&[u8]; 5] = [b"\x89PNG\r\n\x1a\n", &[0xFF, 0xD8, 0xFF], b"GIF89a", b"RIFF\0\0\0\0WEBP", b""];
            let mut b = heads[which].to_vec();
            b.extend_from_slice(&tail);
            if let Some(kind) = sniff(&b) {
                let _ = dimensions(kind, &b);
            }
            for kind in [ImageKind::Png, ImageKind::Jpeg, ImageKind::Gif, ImageKind::Webp] {
                let _ = dimensions(kind, &b);
            }
            let _ = binary_kind(&b);
            let _ = is_binary(&b);
        }
    }
}
