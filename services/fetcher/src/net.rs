//! Address policy: no request reaches a private, loopback or link-local address unless the
//! crawl allows it. Checked after DNS resolution (a public name can point inside), inside
//! the resolver reqwest uses, so redirects and connection reuse cannot slip past it.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// Marker in the error text so the fetcher can tell a policy block from a DNS failure.
pub const BLOCKED_MARKER: &str = "blocked non-public address";

pub fn is_public(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => is_public_v4(v4),
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public_v4(v4);
            }
            is_public_v6(v6)
        }
    }
}

fn is_public_v4(ip: Ipv4Addr) -> bool {
    let o = ip.octets();
    !(ip.is_private()
        || ip.is_loopback()
        || ip.is_link_local()
        || ip.is_unspecified()
        || ip.is_broadcast()
        || ip.is_documentation()
        || ip.is_multicast() // 224.0.0.0/4
        || o[0] == 0
        || (o[0] == 100 && (o[1] & 0xC0) == 64) // 100.64.0.0/10, carrier-grade NAT
        || (o[0] == 192 && o[1] == 0 && o[2] == 0) // 192.0.0.0/24, IETF protocol assignments
        || (o[0] == 198 && (o[1] & 0xFE) == 18) // 198.18.0.0/15, benchmarking
        || o[0] >= 240)
}

fn is_public_v6(ip: Ipv6Addr) -> bool {
    let s = ip.segments();
    !(ip.is_loopback()
        || ip.is_unspecified()
        || (s[0] & 0xFE00) == 0xFC00 // unique local
        || (s[0] & 0xFFC0) == 0xFE80 // link-local
        || (s[0] & 0xFFC0) == 0xFEC0 // site-local (deprecated, still routed inside some sites)
        || (s[0] & 0xFF00) == 0xFF00 // multicast
        || (s[0] == 0x0064 && s[1] == 0xFF9B && s[2..6] == [0; 4]) // NAT64 64:ff9b::/96
        || s[0] == 0x2002 // 6to4: an IPv4 address inside, any of them
        || (s[0] == 0x2001 && s[1] == 0x0DB8) // documentation
        || s[..6] == [0; 6]) // IPv4-compatible ::a.b.c.d (deprecated)
}

/// A resolver that drops non-public addresses unless `allow_private`.
pub struct GuardedResolver {
    pub allow_private: bool,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let allow = self.allow_private;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addrs: Vec<SocketAddr> =
                tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let kept: Vec<SocketAddr> = addrs
                .iter()
                .copied()
                .filter(|a| allow || is_public(a.ip()))
                .collect();
            if kept.is_empty() && !addrs.is_empty() {
                return Err(
                    format!("{BLOCKED_MARKER}: {host} resolves to {}", addrs[0].ip()).into(),
                );
            }
            Ok(Box::new(kept.into_iter()) as Addrs)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_addresses() {
        for private in [
            "127.0.0.1",
            "10.1.2.3",
            "192.168.0.1",
            "172.16.5.5",
            "169.254.1.1",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fe80::1",
            "fd00::1",
            "::ffff:127.0.0.1",
            "192.0.0.8",
            "224.0.0.251",
            "239.255.255.250",
            "64:ff9b::a00:1",
            "64:ff9b::808:808",
            "2002:c0a8:101::1",
            "::127.0.0.1",
            "::10.0.0.1",
            "fec0::1",
            "2001:db8::1",
        ] {
            assert!(!is_public(private.parse().unwrap()), "{private}");
        }
        for public in ["93.184.216.34", "1.1.1.1", "2606:4700::1111"] {
            assert!(is_public(public.parse().unwrap()), "{public}");
        }
    }
}
