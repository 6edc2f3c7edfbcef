//! Recognizing what a file holds from its first bytes: images (with their
//! dimensions when the header gives them cheaply), other well-known binary
//! formats, and binary content in general.
//!
//! Works on a prefix the caller has already read; never reads on its own
//! and never panics on short or malformed headers.

/// How many leading bytes the callers read for sniffing.
pub(super) const SNIFF_LEN: usize = 64 * 1024;

/// An image format `Read` describes instead of refusing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ImageKind {
    Png,
    Jpeg,
    Gif,
    Webp,
}

impl ImageKind {
    pub(super) fn name(self) -> &'static str {
        match self {
            Self::Png => "PNG",
            Self::Jpeg => "JPEG",
            Self::Gif => "GIF",
            Self::Webp => "WebP",
        }
    }

    pub(super) fn mime(self) -> &'static str {
        match self {
            Self::Png => "image/png",
            Self::Jpeg => "image/jpeg",
            Self::Gif => "image/gif",
            Self::Webp => "image/webp",
        }
    }
}

/// An image recognized by its magic bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ImageInfo {
    pub kind: ImageKind,
    /// Width and height in pixels, when the header holds them.
    pub dimensions: Option<(u32, u32)>,
}

/// Recognizes PNG, JPEG, GIF and WebP by their magic bytes.
pub(super) fn image(head: &[u8]) -> Option<ImageInfo> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        let dimensions = match (be32(head, 16), be32(head, 20)) {
            (Some(w), Some(h)) if head.get(12..16) == Some(b"IHDR") => Some((w, h)),
            _ => None,
        };
        return Some(ImageInfo {
            kind: ImageKind::Png,
            dimensions,
        });
    }
    if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        let dimensions = le16(head, 6)
            .zip(le16(head, 8))
            .map(|(w, h)| (u32::from(w), u32::from(h)));
        return Some(ImageInfo {
            kind: ImageKind::Gif,
            dimensions,
        });
    }
    if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        return Some(ImageInfo {
            kind: ImageKind::Jpeg,
            dimensions: jpeg_dimensions(head),
        });
    }
    if head.len() >= 12 && &head[0..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        return Some(ImageInfo {
            kind: ImageKind::Webp,
            dimensions: webp_dimensions(head),
        });
    }
    None
}

/// A name for other common binary formats, for a more useful refusal.
pub(super) fn binary_format(head: &[u8]) -> Option<&'static str> {
    const MAGIC: &[(&[u8], &str)] = &[
        (b"%PDF-", "PDF document"),
        (
            b"PK\x03\x04",
            "ZIP archive (or a format built on it: jar, docx, xlsx, …)",
        ),
        (b"\x1f\x8b", "gzip archive"),
        (b"\x7fELF", "ELF executable or library"),
        (b"\xfe\xed\xfa\xcf", "Mach-O binary"),
        (b"\xcf\xfa\xed\xfe", "Mach-O binary"),
        (b"MZ", "Windows executable"),
        (b"\x00asm", "WebAssembly module"),
        (b"SQLite format 3\x00", "SQLite database"),
        (b"BM", "BMP image"),
        (b"II*\x00", "TIFF image"),
        (b"MM\x00*", "TIFF image"),
        (b"\x00\x00\x01\x00", "ICO image"),
        (b"7z\xbc\xaf\x27\x1c", "7-Zip archive"),
        (b"\xfd7zXZ\x00", "xz archive"),
        (b"BZh", "bzip2 archive"),
        (b"\x28\xb5\x2f\xfd", "zstd archive"),
    ];
    MAGIC
        .iter()
        .find(|(magic, _)| head.starts_with(magic))
        .map(|(_, name)| *name)
}

/// Whether `head` looks binary: it holds a NUL byte, as ripgrep and git
/// decide.
pub(super) fn has_nul(head: &[u8]) -> bool {
    head.contains(&0)
}

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn be32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn le24(b: &[u8], at: usize) -> Option<u32> {
    let s = b.get(at..at + 3)?;
    Some(u32::from(s[0]) | (u32::from(s[1]) << 8) | (u32::from(s[2]) << 16))
}

/// Walks the JPEG marker segments to the first start-of-frame marker.
fn jpeg_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    let mut at = 2;
    loop {
        // Skip fill bytes before a marker.
        while *b.get(at)? == 0xFF && *b.get(at + 1)? == 0xFF {
            at += 1;
        }
        if *b.get(at)? != 0xFF {
            return None;
        }
        let marker = *b.get(at + 1)?;
        // Markers without a length.
        if marker == 0xD8 || marker == 0x01 || (0xD0..=0xD7).contains(&marker) {
            at += 2;
            continue;
        }
        let len = usize::from(be16(b, at + 2)?);
        let is_sof = matches!(marker, 0xC0..=0xCF) && !matches!(marker, 0xC4 | 0xC8 | 0xCC);
        if is_sof {
            let h = be16(b, at + 5)?;
            let w = be16(b, at + 7)?;
            return Some((u32::from(w), u32::from(h)));
        }
        if len < 2 {
            return None;
        }
        at += 2 + len;
    }
}

fn webp_dimensions(b: &[u8]) -> Option<(u32, u32)> {
    match b.get(12..16)? {
        b"VP8X" => Some((le24(b, 24)? + 1, le24(b, 27)? + 1)),
        b"VP8L" => {
            if *b.get(20)? != 0x2F {
                return None;
            }
            let bits = u32::from_le_bytes(b.get(21..25)?.try_into().ok()?);
            Some(((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1))
        }
        b"VP8 " => {
            if b.get(23..26)? != [0x9D, 0x01, 0x2A] {
                return None;
            }
            Some((
                u32::from(le16(b, 26)? & 0x3FFF),
                u32::from(le16(b, 28)? & 0x3FFF),
            ))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn png_dimensions() {
        let mut png = b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDR".to_vec();
        png.extend_from_slice(&640u32.to_be_bytes());
        png.extend_from_slice(&480u32.to_be_bytes());
        let info = image(&png).unwrap();
        assert_eq!(info.kind, ImageKind::Png);
        assert_eq!(info.dimensions, Some((640, 480)));
        // Truncated header: still a PNG, no dimensions, no panic.
        assert_eq!(image(&png[..10]).unwrap().dimensions, None);
    }

    #[test]
    fn gif_and_jpeg_dimensions() {
        let gif = b"GIF89a\x0a\x00\x14\x00";
        assert_eq!(image(gif).unwrap().dimensions, Some((10, 20)));
        // SOI, APP0 (len 4), SOF0 with h=2 w=3.
        let jpeg = [
            0xFF, 0xD8, 0xFF, 0xE0, 0x00, 0x04, 0x00, 0x00, 0xFF, 0xC0, 0x00, 0x11, 0x08, 0x00,
            0x02, 0x00, 0x03,
        ];
        assert_eq!(image(&jpeg).unwrap().dimensions, Some((3, 2)));
        assert_eq!(image(&jpeg[..9]).unwrap().dimensions, None);
    }

    #[test]
    fn garbage_never_panics() {
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 % 256) as u8).collect();
            let _ = image(&junk);
            let mut riff = b"RIFF\0\0\0\0WEBPVP8X".to_vec();
            riff.extend_from_slice(&junk);
            let _ = image(&riff);
            let mut jpeg = vec![0xFF, 0xD8, 0xFF];
            jpeg.extend_from_slice(&junk);
            let _ = image(&jpeg);
        }
    }
}
