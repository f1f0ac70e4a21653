//! Host patterns (the allowlist's entries), request-host normalisation, and the test of which
//! addresses count as public.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::error::{Error, Result};

/// One allowlist entry: an exact host (a DNS name or an IP literal) or `*.suffix`, which matches
/// subdomains of `suffix` at any depth and never `suffix` itself.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum HostPattern {
    /// A lower-case DNS name without a trailing dot, or an IP address in canonical form
    /// (IPv6 without brackets).
    Exact(String),
    /// The suffix after `*.`, lower-case: `Suffix("example.com")` matches `a.example.com`.
    Suffix(String),
}

impl HostPattern {
    /// Parses a pattern as given in `rules`, `allow`, `allowPrivate` or a sandbox's
    /// `network.allow`. A URL, a port, a path or a malformed name is a `ConfigurationError`.
    pub fn parse(s: &str) -> Result<HostPattern> {
        HostPattern::parse_named(s, "host pattern")
    }

    /// `parse`, with `what` naming the option in the error message ("host in network.allow").
    pub fn parse_named(s: &str, what: &str) -> Result<HostPattern> {
        let bad = |why: &str| Error::config(format!("Invalid {what} \"{s}\": {why}"));
        if s.is_empty() {
            return Err(bad("it is empty"));
        }
        if s.contains("://") {
            return Err(bad("give a host name such as api.example.com, not a URL"));
        }
        if s.contains('/') {
            return Err(bad("give a host name without a path"));
        }
        if s.contains('@') {
            return Err(bad("give a host name without user information"));
        }
        if let Some(rest) = s.strip_prefix("*.") {
            if rest.contains('*') {
                return Err(bad("only one leading \"*.\" is allowed"));
            }
            return match normalize_dns_name(rest) {
                Some(name) => Ok(HostPattern::Suffix(name)),
                None => Err(bad("\"*.\" must be followed by a domain name")),
            };
        }
        if s.contains('*') {
            return Err(bad("a wildcard is only allowed as a leading \"*.\""));
        }
        if let Some(ip) = parse_ip(s) {
            return Ok(HostPattern::Exact(ip.to_string()));
        }
        if s.contains(':') {
            return Err(bad("give a host name without a port"));
        }
        match normalize_dns_name(s) {
            Some(name) => Ok(HostPattern::Exact(name)),
            None => Err(bad("expected a host name (api.example.com), an IP address or *.suffix")),
        }
    }

    /// Whether a normalised request host (see [`normalize_host`]) matches.
    pub fn matches(&self, host: &str) -> bool {
        match self {
            HostPattern::Exact(h) => h == host,
            HostPattern::Suffix(suffix) => {
                host.len() > suffix.len() + 1
                    && host.ends_with(suffix.as_str())
                    && host.as_bytes()[host.len() - suffix.len() - 1] == b'.'
            }
        }
    }

    /// Higher is more specific: an exact host beats any suffix, a longer suffix a shorter one.
    pub(crate) fn specificity(&self) -> usize {
        match self {
            HostPattern::Exact(_) => usize::MAX,
            HostPattern::Suffix(s) => s.len(),
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Suffix(s) => write!(f, "*.{s}"),
        }
    }
}

/// Checks a host pattern and returns its normalised form (`API.Example.com.` →
/// `api.example.com`, `[::1]` → `::1`). Reused by the sandbox for `network.allow`.
pub fn validate_host_pattern(s: &str) -> Result<String> {
    HostPattern::parse(s).map(|p| p.to_string())
}

/// An IP literal, IPv6 with or without brackets.
pub(crate) fn parse_ip(s: &str) -> Option<IpAddr> {
    let inner = s.strip_prefix('[').and_then(|r| r.strip_suffix(']'));
    match inner {
        Some(v6) => v6.parse::<Ipv6Addr>().ok().map(IpAddr::V6),
        None => s.parse::<IpAddr>().ok(),
    }
}

/// A request's host (from an absolute-form URL, a CONNECT target or a path-form segment) in the
/// form patterns are compared with, or `None` when it is no valid host. Numeric forms that only
/// some resolvers read as addresses (`0x7f.1`, `2130706433`) are refused.
pub(crate) fn normalize_host(s: &str) -> Option<String> {
    if let Some(ip) = parse_ip(s) {
        return Some(ip.to_string());
    }
    normalize_dns_name(s)
}

/// A DNS name in the form patterns are compared with (lower case, no trailing dot), or `None`.
pub(crate) fn normalize_dns_name(s: &str) -> Option<String> {
    let s = s.strip_suffix('.').unwrap_or(s);
    if s.is_empty() || s.len() > 253 {
        return None;
    }
    let mut last = "";
    for label in s.split('.') {
        let ok = !label.is_empty()
            && label.len() <= 63
            && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            && !label.starts_with('-')
            && !label.ends_with('-');
        if !ok {
            return None;
        }
        last = label;
    }
    // A last label of digits makes it an IPv4 address to URL parsers and to getaddrinfo.
    if last.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(s.to_ascii_lowercase())
}

/// Whether an address may be connected to without `allowPrivate`: false for loopback,
/// private, link-local, CGNAT, multicast, unspecified, documentation, benchmarking and other
/// special-purpose ranges, for IPv6 ULA/link-local/site-local, and for IPv6 forms that embed a
/// non-public IPv4 address.
pub fn is_public_ip(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => is_public_v6(v6),
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    !(a == 0                                  // "this network", unspecified
        || a == 10                            // private
        || a == 127                           // loopback
        || (a == 100 && (64..128).contains(&b)) // CGNAT 100.64/10
        || (a == 169 && b == 254)             // link-local, cloud metadata
        || (a == 172 && (16..32).contains(&b)) // private
        || (a == 192 && b == 0 && c == 0)     // IETF protocol assignments
        || (a == 192 && b == 0 && c == 2)     // TEST-NET-1
        || (a == 192 && b == 88 && c == 99)   // 6to4 relay anycast
        || (a == 192 && b == 168)             // private
        || (a == 198 && (b == 18 || b == 19)) // benchmarking
        || (a == 198 && b == 51 && c == 100)  // TEST-NET-2
        || (a == 203 && b == 0 && c == 113)   // TEST-NET-3
        || a >= 224) // multicast, reserved, broadcast
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    if ip.is_unspecified() || ip.is_loopback() {
        return false;
    }
    // IPv4-mapped ::ffff:a.b.c.d and NAT64 64:ff9b::a.b.c.d reach the embedded IPv4 address.
    if let Some(v4) = ip.to_ipv4_mapped() {
        return is_public_v4(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        let [.., hi, lo] = s;
        return is_public_v4(Ipv4Addr::from(((hi as u32) << 16) | lo as u32));
    }
    // 6to4 2002:AABB:CCDD::/48 embeds an IPv4 address.
    if s[0] == 0x2002 {
        return is_public_v4(Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32));
    }
    !(s[0..6] == [0, 0, 0, 0, 0, 0]            // IPv4-compatible ::/96 (deprecated)
        || (s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1) // NAT64 local use 64:ff9b:1::/48
        || (s[0] == 0x100 && s[1..4] == [0, 0, 0]) // discard-only 100::/64
        || (s[0] == 0x2001 && s[1] < 0x200)     // IETF 2001::/23 (Teredo, ORCHID, benchmarking)
        || (s[0] == 0x2001 && s[1] == 0xdb8)     // documentation
        || (s[0] & 0xfe00) == 0xfc00             // unique local fc00::/7
        || (s[0] & 0xffc0) == 0xfe80             // link-local fe80::/10
        || (s[0] & 0xffc0) == 0xfec0             // site-local fec0::/10 (deprecated)
        || (s[0] & 0xff00) == 0xff00) // multicast
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Code;

    #[test]
    fn broker_host_patterns_normalise_and_refuse() {
        for (given, want) in [
            ("api.github.com", "api.github.com"),
            ("API.GitHub.com.", "api.github.com"),
            ("*.Example.com", "*.example.com"),
            ("localhost", "localhost"),
            ("127.0.0.1", "127.0.0.1"),
            ("::1", "::1"),
            ("[::1]", "::1"),
            ("[2001:DB8::0001]", "2001:db8::1"),
            ("my_host.internal", "my_host.internal"),
        ] {
            assert_eq!(validate_host_pattern(given).unwrap(), want, "{given}");
        }
        for bad in [
            "",
            "https://api.github.com",
            "api.github.com/path",
            "api.github.com:443",
            "user@api.github.com",
            "*",
            "*.",
            "**.example.com",
            "a.*.example.com",
            "*.*.example.com",
            "api.*",
            "foo bar.com",
            "-a.example.com",
            "a-.example.com",
            "a..example.com",
            "1.2.3",
            "2130706433",
            "0x7f.1",
            "[::1",
            "::1]",
            "ex%61mple.com",
        ] {
            let err = validate_host_pattern(bad).unwrap_err();
            assert_eq!(err.code, Code::Configuration, "{bad}");
            assert!(err.message.contains("Invalid host pattern"), "{bad}: {}", err.message);
        }
        let long_label = format!("{}.com", "a".repeat(64));
        assert!(validate_host_pattern(&long_label).is_err());
    }

    #[test]
    fn broker_suffix_matches_subdomains_only() {
        let p = HostPattern::parse("*.example.com").unwrap();
        assert!(p.matches("a.example.com"));
        assert!(p.matches("a.b.example.com"));
        assert!(!p.matches("example.com"));
        assert!(!p.matches("badexample.com"));
        assert!(!p.matches("a.example.com.evil.org"));
        let e = HostPattern::parse("example.com").unwrap();
        assert!(e.matches("example.com"));
        assert!(!e.matches("a.example.com"));
        assert_eq!(normalize_host("A.Example.COM.").as_deref(), Some("a.example.com"));
        assert_eq!(normalize_host("[::FFFF:127.0.0.1]").as_deref(), Some("::ffff:127.0.0.1"));
        assert_eq!(normalize_host("0x7f.1"), None);
        assert_eq!(normalize_host("a%2fb"), None);
    }

    #[test]
    fn broker_non_public_addresses() {
        for ip in [
            "127.0.0.1",
            "127.8.9.10",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.127.255.255",
            "0.0.0.0",
            "0.1.2.3",
            "224.0.0.1",
            "239.255.255.250",
            "240.0.0.1",
            "255.255.255.255",
            "192.0.2.1",
            "198.51.100.7",
            "203.0.113.9",
            "198.18.0.1",
            "192.0.0.8",
            "::",
            "::1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "fec0::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::1",
            "2002:7f00:1::",
            "2001:db8::1",
            "2001::1",
            "::127.0.0.1",
            "100::1",
        ] {
            assert!(!is_public_ip(ip.parse().unwrap()), "{ip} should be non-public");
        }
        for ip in [
            "1.1.1.1",
            "8.8.8.8",
            "93.184.216.34",
            "172.15.0.1",
            "172.32.0.1",
            "100.63.0.1",
            "100.128.0.1",
            "192.169.0.1",
            "2606:4700::1111",
            "2a00:1450::1",
            "::ffff:8.8.8.8",
            "64:ff9b::808:808",
            "2002:808:808::",
        ] {
            assert!(is_public_ip(ip.parse().unwrap()), "{ip} should be public");
        }
    }
}
