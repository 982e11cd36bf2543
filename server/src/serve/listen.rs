//! Listen addresses as llama-swap (Go's `net.Listen`) takes them:
//! `host:port`, `[v6]:port`, and `:port` for every interface.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::str::FromStr;

use tokio::net::TcpListener;

/// Where to listen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListenAddr {
    /// `:port` (or `0.0.0.0`/`[::]` written out): every interface, IPv6 and
    /// IPv4 where the system allows both on one socket.
    AllInterfaces {
        /// The port; 0 picks a free one.
        port: u16,
    },
    /// `host:port`: one address (a name is resolved when binding).
    Host {
        /// The host as written, without brackets.
        host: String,
        /// The port; 0 picks a free one.
        port: u16,
    },
}

/// A listen address that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenError {
    /// Not `host:port` or `:port`.
    #[error("{got:?} is not an address: use host:port, [ipv6]:port or :port (every interface)")]
    Malformed {
        /// What was given.
        got: String,
    },
    /// The address cannot be bound (in use, no permission, unknown host).
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: ListenAddr,
        /// The system's reason.
        #[source]
        source: std::io::Error,
    },
}

impl FromStr for ListenAddr {
    type Err = ListenError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed = || ListenError::Malformed {
            got: text.to_owned(),
        };
        let (host, port) = text.rsplit_once(':').ok_or_else(malformed)?;
        let port: u16 = port.parse().map_err(|_| malformed())?;
        let host = match host.strip_prefix('[') {
            Some(inner) => inner.strip_suffix(']').ok_or_else(malformed)?,
            // An unbracketed IPv6 address has more colons than the port's.
            None if host.contains(':') => return Err(malformed()),
            None => host,
        };
        let unspecified = host.parse::<IpAddr>().is_ok_and(|ip| ip.is_unspecified());
        if host.is_empty() || unspecified {
            return Ok(ListenAddr::AllInterfaces { port });
        }
        if host.chars().any(char::is_whitespace) {
            return Err(malformed());
        }
        Ok(ListenAddr::Host {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for ListenAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListenAddr::AllInterfaces { port } => write!(f, ":{port}"),
            ListenAddr::Host { host, port } if host.contains(':') => write!(f, "[{host}]:{port}"),
            ListenAddr::Host { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

impl ListenAddr {
    /// The port.
    #[must_use]
    pub fn port(&self) -> u16 {
        match self {
            ListenAddr::AllInterfaces { port } | ListenAddr::Host { port, .. } => *port,
        }
    }

    /// Whether only this machine can connect (a loopback address or `localhost`).
    #[must_use]
    pub fn is_loopback_only(&self) -> bool {
        match self {
            ListenAddr::AllInterfaces { .. } => false,
            ListenAddr::Host { host, .. } => {
                host.eq_ignore_ascii_case("localhost")
                    || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback())
            }
        }
    }

    /// Binds the address. Every interface means the IPv6 wildcard (which also
    /// takes IPv4 connections on Linux unless `bindv6only` is set), or the IPv4
    /// one where IPv6 is not available.
    ///
    /// # Errors
    ///
    /// [`ListenError::Bind`] with the system's reason.
    pub async fn bind(&self) -> Result<TcpListener, ListenError> {
        let bound = match self {
            ListenAddr::AllInterfaces { port } => {
                let v6 = SocketAddr::from((Ipv6Addr::UNSPECIFIED, *port));
                match TcpListener::bind(v6).await {
                    Ok(listener) => Ok(listener),
                    Err(error) if ipv6_unavailable(&error) => {
                        TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, *port))).await
                    }
                    Err(error) => Err(error),
                }
            }
            ListenAddr::Host { host, port } => TcpListener::bind((host.as_str(), *port)).await,
        };
        bound.map_err(|source| ListenError::Bind {
            addr: self.clone(),
            source,
        })
    }
}

impl ListenAddr {
    /// As [`bind`](Self::bind), but when the port is 0 (the system picks
    /// one), a port `reserved` says belongs to something else (the models'
    /// `${PORT}` numbers) is not kept: the system is asked again (holding the
    /// ports refused until the end, so it offers others), up to 32 times;
    /// then the last port offered is kept with a warning.
    ///
    /// # Errors
    ///
    /// As [`bind`](Self::bind).
    pub async fn bind_avoiding(
        &self,
        reserved: impl Fn(u16) -> bool,
    ) -> Result<TcpListener, ListenError> {
        const TRIES: usize = 32;
        let mut refused = Vec::new();
        loop {
            let listener = self.bind().await?;
            let port = listener.local_addr().map_or(0, |a| a.port());
            if self.port() != 0 || !reserved(port) {
                return Ok(listener);
            }
            if refused.len() + 1 == TRIES {
                tracing::warn!(
                    port,
                    "every port the system offered for the listener is one a model uses; keeping {port}"
                );
                return Ok(listener);
            }
            tracing::debug!(
                port,
                "the system offered a model's port for the listener; asking again"
            );
            refused.push(listener);
        }
    }
}

/// The errors a system without IPv6 answers a bind to `[::]` with.
fn ipv6_unavailable(error: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        error.kind(),
        ErrorKind::AddrNotAvailable | ErrorKind::Unsupported
    ) || error.raw_os_error() == Some(97) // EAFNOSUPPORT on Linux
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn port_0_does_not_keep_a_port_reserved_for_a_model() {
        let offered = std::sync::Mutex::new(Vec::new());
        let addr = parse("127.0.0.1:0");
        let listener = addr
            .bind_avoiding(|port| {
                let mut offered = offered.lock().unwrap();
                offered.push(port);
                // The first two ports offered belong to models.
                offered.len() <= 2
            })
            .await
            .unwrap();
        let kept = listener.local_addr().unwrap().port();
        let offered = offered.into_inner().unwrap();
        assert_eq!(offered.len(), 3, "{offered:?}");
        assert_eq!(kept, offered[2]);
        assert!(!offered[..2].contains(&kept), "{offered:?}");
    }

    fn parse(text: &str) -> ListenAddr {
        text.parse().unwrap()
    }

    #[test]
    fn a_bare_port_means_every_interface_like_go() {
        assert_eq!(parse(":8080"), ListenAddr::AllInterfaces { port: 8080 });
        assert_eq!(parse("0.0.0.0:80"), ListenAddr::AllInterfaces { port: 80 });
        assert_eq!(parse("[::]:0"), ListenAddr::AllInterfaces { port: 0 });
        assert!(!parse(":8080").is_loopback_only());
    }

    #[test]
    fn hosts_and_bracketed_ipv6_are_kept() {
        assert_eq!(
            parse("127.0.0.1:8080"),
            ListenAddr::Host {
                host: "127.0.0.1".into(),
                port: 8080
            }
        );
        assert_eq!(
            parse("[::1]:9"),
            ListenAddr::Host {
                host: "::1".into(),
                port: 9
            }
        );
        assert!(parse("[::1]:9").is_loopback_only());
        assert!(parse("localhost:8080").is_loopback_only());
        assert!(!parse("192.168.1.5:8080").is_loopback_only());
        assert_eq!(parse("[::1]:9").to_string(), "[::1]:9");
    }

    #[test]
    fn malformed_addresses_are_refused() {
        for bad in [
            "8080",
            "host",
            "host:port",
            ":99999",
            "::1:80",
            "[::1:80",
            "a b:1",
        ] {
            assert!(bad.parse::<ListenAddr>().is_err(), "{bad}");
        }
    }
}
