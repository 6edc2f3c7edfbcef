//! Bounds how deeply a page's elements nest before the HTML converter sees
//! it: the converter (and the DOM it builds) recurses once per level, so a
//! page of ~100 KB of nested elements would overflow the stack and abort
//! kaji. Tags deeper than the limit are dropped; their text is kept.
//!
//! A single forward pass over the bytes, with no recursion; it never
//! changes a page that nests less deeply than the limit, and never fails.

/// The deepest element nesting handed to the converter.
pub const MAX_DEPTH: usize = 200;

/// Elements that never have content (no end tag).
const VOID: [&str; 16] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr", "keygen", "command",
];

/// Elements whose content is text up to their end tag.
const RAW: [&str; 6] = ["script", "style", "textarea", "title", "xmp", "noscript"];

/// `html` with every tag nested deeper than `max` levels removed.
pub fn limit_depth(html: &str, max: usize) -> String {
    let bytes = html.as_bytes();
    let mut out = String::with_capacity(html.len());
    let (mut depth, mut i, mut copied) = (0usize, 0usize, 0usize);
    while let Some(lt) = memchr_from(bytes, b'<', i) {
        let tag = scan_tag(bytes, lt);
        let Some(Tag { end, kind, name }) = tag else {
            i = lt + 1;
            continue;
        };
        let keep = match kind {
            Kind::Other => true,
            Kind::Close => {
                let keep = depth <= max;
                depth = depth.saturating_sub(1);
                keep
            }
            Kind::Open if VOID.contains(&name.as_str()) => depth < max,
            Kind::Open => {
                depth += 1;
                depth <= max
            }
            Kind::SelfClosing => depth < max,
        };
        // Text before the tag is always kept.
        out.push_str(&html[copied..lt]);
        if keep {
            out.push_str(&html[lt..end]);
        }
        copied = end;
        i = end;
        if kind == Kind::Open && RAW.contains(&name.as_str()) {
            // Up to its end tag the content is text, whatever it holds.
            let close = find_close(bytes, end, &name).unwrap_or(bytes.len());
            out.push_str(&html[end..close]);
            copied = close;
            i = close;
        }
    }
    out.push_str(&html[copied..]);
    out
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Open,
    Close,
    SelfClosing,
    /// A comment, doctype or processing instruction.
    Other,
}

struct Tag {
    /// Just past its `>`.
    end: usize,
    kind: Kind,
    /// Lowercase.
    name: String,
}

fn memchr_from(bytes: &[u8], b: u8, from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .iter()
        .position(|&c| c == b)
        .map(|p| p + from)
}

/// The tag starting at `lt` (a `<`), if one does.
fn scan_tag(bytes: &[u8], lt: usize) -> Option<Tag> {
    let rest = &bytes[lt + 1..];
    if rest.starts_with(b"!--") {
        let end = find(bytes, lt + 4, b"-->").map_or(bytes.len(), |p| p + 3);
        return Some(Tag {
            end,
            kind: Kind::Other,
            name: String::new(),
        });
    }
    if matches!(rest.first(), Some(b'!' | b'?')) {
        let end = memchr_from(bytes, b'>', lt).map_or(bytes.len(), |p| p + 1);
        return Some(Tag {
            end,
            kind: Kind::Other,
            name: String::new(),
        });
    }
    let (close, start) = match rest.first() {
        Some(b'/') => (true, lt + 2),
        _ => (false, lt + 1),
    };
    if !bytes.get(start)?.is_ascii_alphabetic() {
        return None;
    }
    let name_end = (start..bytes.len())
        .find(|&k| !(bytes[k].is_ascii_alphanumeric() || bytes[k] == b'-' || bytes[k] == b':'))
        .unwrap_or(bytes.len());
    let name = String::from_utf8_lossy(&bytes[start..name_end]).to_ascii_lowercase();
    let end = tag_end(bytes, name_end);
    let kind = if close {
        Kind::Close
    } else if end >= 2 && bytes[end - 2] == b'/' {
        Kind::SelfClosing
    } else {
        Kind::Open
    };
    Some(Tag { end, kind, name })
}

/// Just past the `>` closing a tag whose attributes start at `from`
/// (quoted values may hold `>`); the end of input when there is none.
fn tag_end(bytes: &[u8], from: usize) -> usize {
    let mut quote: Option<u8> = None;
    for (k, &b) in bytes.iter().enumerate().skip(from) {
        match (quote, b) {
            (Some(q), _) if b == q => quote = None,
            (Some(_), _) => {}
            (None, b'"' | b'\'') => quote = Some(b),
            (None, b'>') => return k + 1,
            _ => {}
        }
    }
    bytes.len()
}

fn find(bytes: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    bytes
        .get(from..)?
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|p| p + from)
}

/// Where `</name` starts (any case), from `from`.
fn find_close(bytes: &[u8], from: usize, name: &str) -> Option<usize> {
    let mut k = from;
    while let Some(lt) = memchr_from(bytes, b'<', k) {
        let after = lt + 2;
        if bytes.get(lt + 1) == Some(&b'/')
            && bytes
                .get(after..after + name.len())
                .is_some_and(|n| n.eq_ignore_ascii_case(name.as_bytes()))
        {
            return Some(lt);
        }
        k = lt + 1;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_page_within_the_limit_is_unchanged() {
        let page = "<!doctype html><html><head><title>a<b</title><script>if (a<b) x('<div>')</script></head>\
<body><!-- <div> --><div class=\"x>y\"><p>One<br>two<img src=a /></p></div>1 < 2</body></html>";
        assert_eq!(limit_depth(page, 5), page);
    }

    #[test]
    fn tags_past_the_limit_go_and_their_text_stays() {
        let page = format!("{}deep{}", "<div>".repeat(10), "</div>".repeat(10));
        let out = limit_depth(&page, 3);
        assert_eq!(
            out,
            format!("{}deep{}", "<div>".repeat(3), "</div>".repeat(3))
        );
    }

    #[test]
    fn unclosed_and_broken_tags_never_panic() {
        for page in [
            "<",
            "<div",
            "<div class='",
            "</",
            "<!--",
            "<script>",
            "<a<b<c",
            "</x></y>",
        ] {
            let _ = limit_depth(page, 2);
        }
        let unclosed = "<span>".repeat(1000);
        assert_eq!(limit_depth(&unclosed, 5).matches("<span>").count(), 5);
    }
}
