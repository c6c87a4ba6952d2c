//! Where a registered endpoint may point (SSRF rules): `https` only unless
//! `ALLOW_HTTP_WEBHOOKS=true`, and never at an address of this machine or its networks —
//! loopback, private, shared (CGNAT), link-local (169.254.0.0/16, the cloud metadata
//! service), multicast, broadcast, unspecified, their IPv6 forms and IPv4-mapped IPv6 —
//! unless `ALLOW_PRIVATE_WEBHOOKS=true`.
//!
//! Checked when an endpoint is registered and again at every dispatch, because DNS may
//! change. At dispatch the name is resolved by [`GuardedResolver`], inside the HTTP
//! client: the connection goes to exactly the addresses that were checked, so a name that
//! rebinds between a check and the connect cannot slip through. Literal addresses never
//! reach a resolver and are checked by [`check_url`]. Redirects are never followed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

/// What the rules allow; the deployed default allows neither.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DestinationPolicy {
    /// `ALLOW_HTTP_WEBHOOKS`: plain `http://` URLs (the local runner's default).
    pub allow_http: bool,
    /// `ALLOW_PRIVATE_WEBHOOKS`: addresses on this machine or private networks.
    pub allow_private: bool,
}

/// Why an address may not be a webhook destination, or `None` when it may.
pub fn refusal(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => refusal_v4(v4),
        IpAddr::V6(v6) => {
            // ::ffff:a.b.c.d reaches the IPv4 address: the same rule applies.
            if let Some(v4) = v6.to_ipv4_mapped() {
                return refusal_v4(v4);
            }
            refusal_v6(v6)
        }
    }
}

fn refusal_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip.is_unspecified() || a == 0 {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared address space")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if ip.is_broadcast() || a >= 240 {
        Some("reserved")
    } else if is_special_purpose_v4(ip) {
        Some("special-purpose")
    } else {
        None
    }
}

/// IANA's special-purpose blocks that no public receiver lives in: documentation
/// (192.0.2.0/24, 198.51.100.0/24, 203.0.113.0/24), protocol assignments (192.0.0.0/24)
/// and benchmarking (198.18.0.0/15). Some networks route them internally.
fn is_special_purpose_v4(ip: Ipv4Addr) -> bool {
    let [a, b, c, _] = ip.octets();
    ip.is_documentation() || matches!((a, b, c), (192, 0, 0) | (198, 18..=19, _))
}

fn refusal_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if first & 0xfe00 == 0xfc00 || first & 0xffc0 == 0xfec0 {
        // Unique local, and the site-local block it replaced.
        Some("private")
    } else if (first == 0x2001 && ip.segments()[1] == 0x0db8)
        || (first == 0x0100 && ip.segments()[1..4].iter().all(|&x| x == 0))
    {
        // Documentation (2001:db8::/32) and discard-only (100::/64).
        Some("special-purpose")
    } else if embedded_v4(ip).is_some_and(|v4| refusal_v4(v4).is_some()) {
        // ::a.b.c.d (IPv4-compatible), ::ffff:0:a.b.c.d (IPv4-translated),
        // 64:ff9b::a.b.c.d and 64:ff9b:1::/48 (NAT64),
        // 2002:aabb:ccdd::/48 (6to4) and Teredo's client reach the IPv4 address.
        Some("embedded IPv4")
    } else {
        None
    }
}

/// The IPv4 address an IPv6 address is a way of reaching, when it is one.
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let v4 = |high: u16, low: u16| {
        Ipv4Addr::new((high >> 8) as u8, high as u8, (low >> 8) as u8, low as u8)
    };
    let compatible = s[..6].iter().all(|&x| x == 0);
    // ::ffff:0:a.b.c.d, IPv4-translated (SIIT).
    let translated = s[..4].iter().all(|&x| x == 0) && s[4] == 0xffff && s[5] == 0;
    let nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2..6].iter().all(|&x| x == 0);
    let local_nat64 = s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1;
    if compatible || translated || nat64 || local_nat64 {
        Some(v4(s[6], s[7]))
    } else if s[0] == 0x2002 {
        Some(v4(s[1], s[2]))
    } else if s[0] == 0x2001 && s[1] == 0 {
        // Teredo: the client's address, inverted, in the last 32 bits.
        Some(v4(!s[6], !s[7]))
    } else {
        None
    }
}

/// Checks everything about `url` that needs no DNS: a parseable `http(s)` URL with a host
/// (`https` unless allowed) and, when the host is a literal address, that address.
pub fn check_url(url: &str, policy: DestinationPolicy) -> Result<Url, String> {
    let parsed = Url::parse(url).map_err(|_| "url must be an absolute URL".to_string())?;
    match parsed.scheme() {
        "https" => {}
        "http" if policy.allow_http => {}
        "http" => {
            return Err(
                "url must use https (http is allowed only with ALLOW_HTTP_WEBHOOKS=true)".into(),
            );
        }
        _ => return Err("url must be an https:// URL".into()),
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err("url must not carry credentials".into());
    }
    match literal_host(&parsed) {
        None if parsed.host_str().is_none_or(str::is_empty) => {
            return Err("url must name a host".into());
        }
        None => {}
        Some(ip) => check_address(ip, policy)?,
    }
    Ok(parsed)
}

/// The host of `url` when it is a literal address (the parser has already normalised
/// forms such as `2130706433` to `127.0.0.1`).
fn literal_host(url: &Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let bare = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    bare.parse().ok()
}

fn check_address(ip: IpAddr, policy: DestinationPolicy) -> Result<(), String> {
    match refusal(ip) {
        Some(kind) if !policy.allow_private => Err(format!(
            "the address {ip} is {kind}; webhooks may not be sent there \
             (ALLOW_PRIVATE_WEBHOOKS=true allows it)"
        )),
        _ => Ok(()),
    }
}

/// Resolves `host` and checks every address it has: one refused address refuses the name
/// (a client could otherwise win the race between addresses).
pub async fn resolve_checked(
    host: &str,
    policy: DestinationPolicy,
) -> Result<Vec<SocketAddr>, String> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, 0))
        .await
        .map_err(|error| format!("the host {host} does not resolve: {error}"))?
        .collect();
    if addresses.is_empty() {
        return Err(format!("the host {host} has no address"));
    }
    for address in &addresses {
        check_address(address.ip(), policy)
            .map_err(|reason| format!("the host {host} resolves to {reason}"))?;
    }
    Ok(addresses)
}

/// How long registration waits for a name's addresses.
const REGISTRATION_LOOKUP: Duration = Duration::from_secs(3);

/// The check at registration: [`check_url`], then the name's addresses, one refused
/// address refusing the URL. A name that does not resolve now (no DNS where the API runs,
/// a record not published yet, a slow resolver) is not refused: dispatch resolves and
/// checks it again before every send. With private destinations allowed there is nothing
/// a lookup could refuse, so none is made.
pub async fn check_registration(url: &str, policy: DestinationPolicy) -> Result<(), String> {
    let parsed = check_url(url, policy)?;
    if policy.allow_private {
        return Ok(());
    }
    if literal_host(&parsed).is_none()
        && let Some(host) = parsed.host_str()
    {
        let lookup = tokio::net::lookup_host((host, 0));
        match tokio::time::timeout(REGISTRATION_LOOKUP, lookup).await {
            Ok(Ok(addresses)) => {
                for address in addresses {
                    check_address(address.ip(), policy)
                        .map_err(|reason| format!("the host {host} resolves to {reason}"))?;
                }
            }
            Ok(Err(error)) => {
                tracing::info!(%host, %error, "webhook host does not resolve yet; it is checked again at dispatch");
            }
            Err(_) => {
                tracing::info!(%host, "webhook host lookup timed out; it is checked again at dispatch");
            }
        }
    }
    Ok(())
}

/// The HTTP client's resolver: the addresses it returns are the ones checked, and the
/// ones connected to.
#[derive(Debug, Clone, Copy)]
pub struct GuardedResolver {
    policy: DestinationPolicy,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy;
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses = resolve_checked(&host, policy).await?;
            Ok(Box::new(addresses.into_iter()) as Addrs)
        })
    }
}

/// The HTTP client for registered endpoints: [`GuardedResolver`], no redirects, no proxy
/// (a proxy would resolve the name itself), a time limit.
pub fn endpoint_client(
    policy: DestinationPolicy,
    timeout: Duration,
) -> anyhow::Result<reqwest::Client> {
    reqwest::Client::builder()
        .timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(GuardedResolver { policy }))
        .user_agent(concat!("notify-queue-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
        .context("cannot build the webhook endpoint HTTP client")
}

#[cfg(test)]
mod tests {
    use super::*;

    const STRICT: DestinationPolicy = DestinationPolicy {
        allow_http: false,
        allow_private: false,
    };

    #[test]
    fn addresses_of_this_machine_and_its_networks_are_refused() {
        for refused in [
            "127.0.0.1",
            "127.8.9.10",
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00::1",
            "ff02::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "::ffff:10.0.0.1",
            "::127.0.0.1",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b:1::7f00:1",
            "2002:7f00:1::",
            "2002:a9fe:a9fe::1",
            "2001:0:4136:e378:8000:63bf:80ff:fffe",
            "::ffff:0:7f00:1",
            "fec0::1",
            "2001:db8::1",
            "100::1",
            "192.0.0.1",
            "192.0.2.1",
            "198.18.0.1",
            "198.19.255.254",
            "198.51.100.7",
            "203.0.113.9",
        ] {
            let ip: IpAddr = refused.parse().expect("address");
            assert!(refusal(ip).is_some(), "{refused} must be refused");
        }
        for allowed in [
            "93.184.216.34",
            "8.8.8.8",
            "2606:4700::1111",
            "::ffff:8.8.8.8",
            "2002:808:808::1",
            "::ffff:0:808:808",
            "198.20.0.1",
            "192.0.3.1",
            "2001:db9::1",
            "100:0:0:1::1",
        ] {
            let ip: IpAddr = allowed.parse().expect("address");
            assert_eq!(refusal(ip), None, "{allowed} must be allowed");
        }
    }

    #[test]
    fn urls_are_checked_without_dns() {
        assert!(check_url("https://example.com/hooks", STRICT).is_ok());
        assert!(check_url("http://example.com/hooks", STRICT).is_err());
        assert!(
            check_url(
                "http://example.com/hooks",
                DestinationPolicy {
                    allow_http: true,
                    ..STRICT
                }
            )
            .is_ok()
        );
        assert!(check_url("ftp://example.com/", STRICT).is_err());
        assert!(check_url("https://user:pw@example.com/", STRICT).is_err());
        for literal in [
            "https://127.0.0.1/",
            "https://10.0.0.1/",
            "https://169.254.169.254/latest/meta-data/",
            "https://[::1]/",
            "https://[::ffff:127.0.0.1]/",
            "https://2130706433/",
        ] {
            let error = check_url(literal, STRICT).expect_err(literal);
            assert!(
                error.contains("ALLOW_PRIVATE_WEBHOOKS"),
                "{literal}: {error}"
            );
        }
        let open = DestinationPolicy {
            allow_http: true,
            allow_private: true,
        };
        assert!(check_url("http://127.0.0.1:9/hooks", open).is_ok());
    }
}
