//! A session's outbound network policy (`HarnessV1NetworkPolicy`): which hosts its commands may
//! name and which addresses the broker may connect to for them.

use serde_json::Value;

use crate::error::Result;

/// A session's outbound network policy (`HarnessV1NetworkPolicy`), applied by its broker to every
/// connection a command asks for, named or by address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetworkPolicy {
    /// Loopback only: the broker opens nothing.
    DenyAll,
    /// Every public address; loopback, private, link-local and metadata addresses stay closed.
    AllowAll,
    /// `allowedHosts` (exact or `*.suffix`) at whatever address they resolve to but loopback and
    /// link-local; `allowedCIDRs` whatever they are; `deniedCIDRs` never, even when allowed.
    Custom { hosts: Vec<super::HostPattern>, allowed: Vec<ipnet::IpNet>, denied: Vec<ipnet::IpNet> },
}

/// The IPv4 address an IPv6 form embeds and reaches (IPv4-mapped, NAT64, 6to4).
fn embedded_v4(ip: std::net::Ipv6Addr) -> Option<std::net::Ipv4Addr> {
    let s = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return Some(v4);
    }
    if s[0] == 0x64 && s[1] == 0xff9b && s[2..6] == [0, 0, 0, 0] {
        return Some(std::net::Ipv4Addr::from(((s[6] as u32) << 16) | s[7] as u32));
    }
    if s[0] == 0x2002 {
        return Some(std::net::Ipv4Addr::from(((s[1] as u32) << 16) | s[2] as u32));
    }
    None
}

/// The address a connection really reaches, for the CIDR tests (an embedded IPv4 address).
fn reached(ip: std::net::IpAddr) -> std::net::IpAddr {
    match ip {
        std::net::IpAddr::V6(v6) => embedded_v4(v6).map(std::net::IpAddr::V4).unwrap_or(ip),
        v4 => v4,
    }
}

/// Cloud metadata services outside the link-local ranges: Alibaba's 100.100.100.200 and AWS's
/// IPv6 fd00:ec2::254.
const METADATA: [std::net::IpAddr; 2] = [
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(100, 100, 100, 200)),
    std::net::IpAddr::V6(std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)),
];

/// Loopback, unspecified (which reaches loopback) or link-local, and cloud metadata services.
fn is_local(ip: std::net::IpAddr) -> bool {
    let to = reached(ip);
    METADATA.contains(&to)
        || match to {
            std::net::IpAddr::V4(v4) => v4.is_loopback() || v4.is_unspecified() || v4.is_link_local(),
            std::net::IpAddr::V6(v6) => {
                v6.is_loopback() || v6.is_unspecified() || (v6.segments()[0] & 0xffc0) == 0xfe80
            }
        }
}

impl NetworkPolicy {
    /// `{ mode: 'deny-all' | 'allow-all' }` or `{ mode: 'custom', allowedHosts?, allowedCIDRs?,
    /// deniedCIDRs? }` with at least one of the allowed lists.
    pub fn from_value(v: &Value, what: &str) -> Result<NetworkPolicy> {
        use crate::error::Error;
        let bad = |m: String| Error::config(format!("{what}: {m}"));
        let Some(o) = v.as_object() else {
            return Err(bad("a network policy is an object with a mode.".into()));
        };
        let list = |key: &str| -> Result<Option<Vec<String>>> {
            match o.get(key) {
                None => Ok(None),
                Some(Value::Array(a)) => a
                    .iter()
                    .map(|x| x.as_str().map(str::to_string))
                    .collect::<Option<Vec<_>>>()
                    .map(Some)
                    .ok_or_else(|| bad(format!("{key} must be an array of strings."))),
                Some(_) => Err(bad(format!("{key} must be an array of strings."))),
            }
        };
        let cidrs = |key: &str| -> Result<Option<Vec<ipnet::IpNet>>> {
            list(key)?
                .map(|l| {
                    l.iter()
                        .map(|c| {
                            c.parse::<ipnet::IpNet>()
                                .or_else(|_| c.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
                                .map_err(|_| bad(format!("{key} entry {c:?} is not a CIDR (such as 10.0.0.0/8).")))
                        })
                        .collect()
                })
                .transpose()
        };
        let known: &[&str] = match o.get("mode").and_then(Value::as_str) {
            Some("deny-all" | "allow-all") => &["mode"],
            Some("custom") => &["mode", "allowedHosts", "allowedCIDRs", "deniedCIDRs"],
            _ => return Err(bad("mode must be 'allow-all', 'deny-all' or 'custom'.".into())),
        };
        if let Some(k) = o.keys().find(|k| !known.contains(&k.as_str())) {
            return Err(bad(format!("unknown field {k:?} for this mode.")));
        }
        Ok(match o.get("mode").and_then(Value::as_str) {
            Some("deny-all") => NetworkPolicy::DenyAll,
            Some("allow-all") => NetworkPolicy::AllowAll,
            _ => {
                let hosts = list("allowedHosts")?;
                let allowed = cidrs("allowedCIDRs")?;
                if hosts.is_none() && allowed.is_none() {
                    return Err(bad("a 'custom' policy needs allowedHosts or allowedCIDRs.".into()));
                }
                let hosts = hosts
                    .unwrap_or_default()
                    .iter()
                    .map(|h| super::HostPattern::parse_named(h, "host in allowedHosts"))
                    .collect::<Result<Vec<_>>>()?;
                NetworkPolicy::Custom {
                    hosts,
                    allowed: allowed.unwrap_or_default(),
                    denied: cidrs("deniedCIDRs")?.unwrap_or_default(),
                }
            }
        })
    }

    /// Whether a request for `host` may go on to resolve it: `false` means no address of it
    /// could pass `permits`.
    pub fn may_resolve(&self, host: &str) -> bool {
        match self {
            NetworkPolicy::DenyAll => false,
            NetworkPolicy::AllowAll => true,
            NetworkPolicy::Custom { hosts, allowed, .. } => {
                !allowed.is_empty() || hosts.iter().any(|p| p.matches(host))
            }
        }
    }

    /// Whether a connection to `ip`, asked for as `host` (a name or an address literal), may be
    /// opened.
    pub fn permits(&self, host: &str, ip: std::net::IpAddr) -> bool {
        let to = reached(ip);
        match self {
            NetworkPolicy::DenyAll => false,
            NetworkPolicy::AllowAll => super::is_public_ip(ip),
            NetworkPolicy::Custom { hosts, allowed, denied } => {
                if denied.iter().any(|n| n.contains(&to) || n.contains(&ip)) {
                    return false;
                }
                if allowed.iter().any(|n| n.contains(&to) || n.contains(&ip)) {
                    return true;
                }
                hosts.iter().any(|p| p.matches(host)) && !is_local(ip)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn policy(v: Value) -> NetworkPolicy {
        NetworkPolicy::from_value(&v, "network").unwrap()
    }

    fn ip(s: &str) -> std::net::IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn allow_all_reaches_public_addresses_only() {
        let p = policy(json!({ "mode": "allow-all" }));
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700:4700::1111"] {
            assert!(p.permits("example.com", ip(public)), "{public}");
        }
        for closed in [
            "127.0.0.1",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "2002:7f00:1::",
        ] {
            assert!(!p.permits("example.com", ip(closed)), "{closed}");
        }
    }

    #[test]
    fn deny_all_opens_nothing() {
        let p = policy(json!({ "mode": "deny-all" }));
        assert!(!p.may_resolve("example.com"));
        assert!(!p.permits("example.com", ip("93.184.216.34")));
        assert!(!p.permits("127.0.0.1", ip("127.0.0.1")));
    }

    #[test]
    fn a_named_host_is_reached_at_private_addresses_but_never_loopback_or_link_local() {
        let p = policy(json!({ "mode": "custom", "allowedHosts": ["registry.internal", "*.corp.example"] }));
        assert!(p.may_resolve("registry.internal") && p.may_resolve("a.corp.example"));
        assert!(!p.may_resolve("example.com"));
        // A registry behind a private or documentation address is still reached by name.
        for reachable in ["10.0.0.5", "192.0.2.10", "93.184.216.34"] {
            assert!(p.permits("registry.internal", ip(reachable)), "{reachable}");
        }
        for closed in [
            "127.0.0.1",
            "0.0.0.0",
            "169.254.169.254",
            "100.100.100.200",
            "fd00:ec2::254",
            "::1",
            "fe80::1",
            "::ffff:127.0.0.1",
        ] {
            assert!(!p.permits("registry.internal", ip(closed)), "{closed}");
        }
        assert!(!p.permits("example.com", ip("93.184.216.34")), "a host not named");
    }

    #[test]
    fn allowed_cidrs_open_loopback_and_denied_cidrs_win() {
        let p = policy(json!({
            "mode": "custom",
            "allowedHosts": ["api.example.com"],
            "allowedCIDRs": ["127.0.0.1/32", "10.0.0.0/8"],
            "deniedCIDRs": ["10.9.0.0/16", "169.254.169.254"]
        }));
        assert!(p.permits("127.0.0.1", ip("127.0.0.1")));
        assert!(p.permits("localhost", ip("127.0.0.1")), "by address, whatever the name");
        assert!(p.permits("anything", ip("::ffff:127.0.0.1")), "the mapped form reaches the same address");
        assert!(!p.permits("127.0.0.2", ip("127.0.0.2")));
        assert!(p.permits("x", ip("10.1.1.1")));
        assert!(!p.permits("x", ip("10.9.1.1")), "denied wins over allowed");
        assert!(!p.permits("api.example.com", ip("10.9.1.1")), "denied wins over a named host");
        assert!(!p.permits("api.example.com", ip("169.254.169.254")));
        assert!(!p.permits("api.example.com", ip("::ffff:10.9.0.1")), "denied in its mapped form too");
    }

    #[test]
    fn bad_policies_are_configuration_errors() {
        for (v, says) in [
            (json!("deny-all"), "an object"),
            (json!({ "mode": "open" }), "mode must be"),
            (json!({ "mode": "custom" }), "needs allowedHosts or allowedCIDRs"),
            (json!({ "mode": "custom", "deniedCIDRs": ["10.0.0.0/8"] }), "needs allowedHosts or allowedCIDRs"),
            (json!({ "mode": "custom", "allowedCIDRs": ["10.0.0.0/33"] }), "is not a CIDR"),
            (json!({ "mode": "custom", "allowedHosts": ["http://x"] }), "allowedHosts"),
            (json!({ "mode": "deny-all", "allowedHosts": [] }), "unknown field"),
        ] {
            let e = NetworkPolicy::from_value(&v, "network").unwrap_err();
            assert_eq!(e.code, crate::error::Code::Configuration, "{v}");
            assert!(e.message.contains(says), "{v}: {}", e.message);
        }
    }
}
