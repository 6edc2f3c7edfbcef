//! A fetch's host as an address, not as text: the one spelling WebFetch
//! rules are matched against, and whether it names the local machine or a
//! private network.
//!
//! [`canonical_host`] parses a URL's host the way a browser does (WHATWG
//! URL): lower case, percent-decoded, without a trailing dot; an IPv4
//! address in any of its spellings (`2130706433`, `0x7f.1`, `0177.0.0.1`,
//! `127.1`) becomes its dotted-quad form and an IPv6 one its compressed
//! form (an IPv4-mapped one, `::ffff:127.0.0.1`, its IPv4 form). Pure: it
//! never resolves a name.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The host of a URL: what follows `scheme://` and any `user@`, up to
/// the port, path, query or fragment; lower-case.
pub fn host_of(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    // A backslash ends the authority as a slash does (WHATWG URL).
    let authority = rest.split(['/', '?', '#', '\\']).next()?;
    let host_port = authority.rsplit('@').next()?;
    let host = if let Some(v6) = host_port.strip_prefix('[') {
        v6.split(']').next()?
    } else {
        host_port.split(':').next()?
    };
    (!host.is_empty()).then(|| host.to_ascii_lowercase())
}

/// The canonical host of `url` (or of a bare host), `None` when it has
/// none or it is not a valid host.
pub fn canonical_host(url: &str) -> Option<String> {
    let raw = host_of(url)?;
    canonical_host_name(&raw)
}

/// The canonical form of a host as written (see the module docs).
pub fn canonical_host_name(raw: &str) -> Option<String> {
    let raw = raw.trim_start_matches('[').trim_end_matches(']');
    if raw.contains(':') {
        let v6: Ipv6Addr = raw.parse().ok()?;
        return Some(match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        });
    }
    let decoded = percent_decode(raw)?.to_ascii_lowercase();
    let host = decoded.strip_suffix('.').unwrap_or(&decoded);
    if host.is_empty() || host.contains(['/', '\\', '@', ' ', '%', '#', '?']) {
        return None;
    }
    match parse_ipv4(host) {
        Ipv4Parse::Address(v4) => Some(v4.to_string()),
        Ipv4Parse::Invalid => None,
        Ipv4Parse::NotIpv4 => Some(host.to_string()),
    }
}

/// The address a canonical host names, when it is an IP literal.
pub fn host_ip(canonical: &str) -> Option<IpAddr> {
    canonical.parse().ok()
}

/// Whether a canonical host names this machine or a private network:
/// `localhost` (and `*.localhost`), a loopback, private (RFC 1918, shared
/// 100.64/10, IPv6 unique-local), link-local or unspecified address.
pub fn is_local_host(canonical: &str) -> bool {
    if canonical == "localhost" || canonical.ends_with(".localhost") {
        return true;
    }
    host_ip(canonical).is_some_and(is_local_ip)
}

/// Whether `ip` is loopback, private, shared, link-local, unspecified or
/// broadcast (see [`is_local_host`]).
pub fn is_local_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, ..] = v4.octets();
            v4.is_loopback()
                || v4.is_private()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || (a == 100 && (64..128).contains(&b))
                || a == 0
        }
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => is_local_ip(IpAddr::V4(v4)),
            None => {
                let first = v6.segments()[0];
                v6.is_loopback()
                    || v6.is_unspecified()
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80
            }
        },
    }
}

fn percent_decode(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = std::str::from_utf8(bytes.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

enum Ipv4Parse {
    Address(Ipv4Addr),
    Invalid,
    NotIpv4,
}

/// The WHATWG IPv4 parser: up to four dot-separated numbers, each decimal,
/// `0x` hex or `0`-prefixed octal; the last fills the remaining bytes.
fn parse_ipv4(host: &str) -> Ipv4Parse {
    let mut parts: Vec<&str> = host.split('.').collect();
    if parts.last() == Some(&"") && parts.len() > 1 {
        parts.pop();
    }
    // Only a host whose last part is a number is an IPv4 address.
    let Some(last) = parts.last() else {
        return Ipv4Parse::NotIpv4;
    };
    if parse_part(last).is_none() {
        return Ipv4Parse::NotIpv4;
    }
    if parts.len() > 4 {
        return Ipv4Parse::Invalid;
    }
    let Some(numbers) = parts
        .iter()
        .map(|p| parse_part(p))
        .collect::<Option<Vec<u64>>>()
    else {
        return Ipv4Parse::Invalid;
    };
    let (init, tail) = numbers.split_at(numbers.len() - 1);
    if init.iter().any(|n| *n > 255) {
        return Ipv4Parse::Invalid;
    }
    let tail_bits = 8 * (5 - numbers.len()) as u32;
    if tail[0] >= 1u64 << tail_bits {
        return Ipv4Parse::Invalid;
    }
    let mut value = tail[0];
    for (i, n) in init.iter().enumerate() {
        value += n << (8 * (3 - i));
    }
    match u32::try_from(value) {
        Ok(v) => Ipv4Parse::Address(Ipv4Addr::from(v)),
        Err(_) => Ipv4Parse::Invalid,
    }
}

fn parse_part(part: &str) -> Option<u64> {
    if part.is_empty() {
        return None;
    }
    let (digits, radix) =
        if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
            (hex, 16)
        } else if part.len() > 1 && part.starts_with('0') {
            (&part[1..], 8)
        } else {
            (part, 10)
        };
    if digits.is_empty() {
        return Some(0);
    }
    if digits.len() > 12 {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_loopback_is_one_address() {
        for url in [
            "http://127.0.0.1/",
            "http://2130706433/",
            "http://0x7f.1/",
            "http://0177.0.0.1/",
            "http://127.1/",
            "http://0x7F000001:8080/x",
            "http://[::ffff:127.0.0.1]/",
            "http://127.0.0.1./",
            "http://%31%32%37.0.0.1/",
        ] {
            assert_eq!(canonical_host(url).as_deref(), Some("127.0.0.1"), "{url}");
        }
        assert_eq!(canonical_host("http://[0:0::1]/").as_deref(), Some("::1"));
        assert_eq!(
            canonical_host("https://Docs.RS./a").as_deref(),
            Some("docs.rs")
        );
        assert_eq!(canonical_host("http://256.256.256.256/"), None);
    }

    #[test]
    fn local_hosts_are_recognised() {
        for host in [
            "127.0.0.1",
            "10.1.2.3",
            "169.254.169.254",
            "192.168.0.1",
            "::1",
            "fe80::1",
            "fd00::2",
            "localhost",
            "a.localhost",
            "100.64.0.1",
            "0.0.0.0",
        ] {
            assert!(is_local_host(host), "{host}");
        }
        for host in ["8.8.8.8", "docs.rs", "2606:4700::1111", "172.32.0.1"] {
            assert!(!is_local_host(host), "{host}");
        }
    }
}
