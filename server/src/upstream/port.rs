//! Refusing to start a model on a port that something else already listens on.
//!
//! Without this check a model whose own server fails to bind ("address already in
//! use") looks healthy: the health probe reaches whatever listens there (another
//! model, an upstream left over by a killed server) and requests go to a process
//! the supervisor does not manage. Before spawning, the supervisor binds the
//! model's address itself for an instant; a local address that cannot be bound
//! because it is in use is a start error naming the port.
//!
//! Only a command that is given the port (in its command line or environment,
//! as `${PORT}` expands, `--port 5800`, `-p 5800:8080`) is expected to bind it.
//! A command that does not mention it attaches to an upstream that runs on its
//! own (a placeholder such as `sleep infinity` beside a server managed
//! elsewhere): that port is meant to be taken already, and is not checked.
//!
//! A port can be in use without anything listening on it: every outgoing TCP
//! connection takes a local port, which the kernel picks from its ephemeral
//! range (Linux: `/proc/sys/net/ipv4/ip_local_port_range`, 32768-60999 by
//! default). A model numbered inside that range collides with them now and
//! then; the error then says it found a connection's end, not another server.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpListener};
use std::ops::RangeInclusive;
use std::time::Duration;

use http::Uri;

use crate::launcher::PortHolder;

/// What holds the port, as the kernel's socket tables show it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// A listening socket.
    Listener,
    /// The local end of a connection to `remote`, in TCP state `state`.
    Connection {
        remote: SocketAddr,
        state: &'static str,
    },
    /// The tables did not say.
    Unknown,
}

impl Found {
    pub(crate) fn holder(self) -> PortHolder {
        match self {
            Found::Listener => PortHolder::Listener,
            Found::Connection { .. } => PortHolder::Connection,
            Found::Unknown => PortHolder::Unknown,
        }
    }
}

/// Longest a host name lookup for the check may take; a slower resolver means the
/// check is skipped, not the start delayed.
const LOOKUP_LIMIT: Duration = Duration::from_secs(2);

/// The model's address cannot be bound: something else holds its port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PortInUse {
    pub(crate) port: u16,
    pub(crate) addr: SocketAddr,
    /// What was found holding it.
    pub(crate) holder: Found,
}

impl std::fmt::Display for PortInUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self { port, addr, holder } = self;
        match holder {
            Found::Listener => write!(
                f,
                "port {port} is already in use: another process listens on {addr} before the \
                 model's command started (an upstream left running by another server, or another \
                 model on the same port); stop that process or give the model another port"
            ),
            Found::Connection { remote, state } => {
                write!(
                    f,
                    "port {port} is in use, not by a server: it is the local end of a connection \
                     to {remote} ({state}), "
                )?;
                match ephemeral_ports() {
                    Some(range) if range.contains(port) => write!(
                        f,
                        "one of the ports the system gives outgoing connections ({}-{}); give the \
                         model a port outside that range",
                        range.start(),
                        range.end()
                    ),
                    _ => write!(
                        f,
                        "made by a program that chose this port; give the model another port"
                    ),
                }
            }
            Found::Unknown => write!(
                f,
                "port {port} is already in use on {addr} (the system does not say by what); free \
                 it or give the model another port"
            ),
        }
    }
}

impl std::error::Error for PortInUse {}

/// The range of local ports the system gives outgoing connections (Linux's
/// `net.ipv4.ip_local_port_range`, which IPv6 uses too); `None` where it
/// cannot be read.
#[must_use]
pub(crate) fn ephemeral_ports() -> Option<RangeInclusive<u16>> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").ok()?;
    parse_port_range(&text)
}

fn parse_port_range(text: &str) -> Option<RangeInclusive<u16>> {
    let mut numbers = text.split_whitespace().map(str::parse::<u16>);
    let low = numbers.next()?.ok()?;
    let high = numbers.next()?.ok()?;
    (low <= high).then_some(low..=high)
}

/// Checks that nothing holds the address of `proxy` (an `http://host:port`
/// URL). Addresses that are not local, names that do not resolve in time, and
/// binds refused for other reasons (privileged ports) pass: only "in use" is an
/// answer the check can trust.
pub(crate) async fn ensure_free(proxy: &str) -> Result<(), PortInUse> {
    let Some((host, port)) = host_and_port(proxy) else {
        return Ok(());
    };
    for ip in resolve(&host, port).await {
        let addr = SocketAddr::new(ip, port);
        match TcpListener::bind(addr) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
                let holder = holder_of(addr);
                return Err(PortInUse { port, addr, holder });
            }
            // Bound (and released at once: std sets SO_REUSEADDR, so the model can
            // bind it right after), or not ours to bind.
            _ => {}
        }
    }
    Ok(())
}

/// What holds `addr`, from the kernel's socket tables (`/proc/net/tcp` and
/// `tcp6`): a listener if there is one, else the first connection whose local
/// end it is.
fn holder_of(addr: SocketAddr) -> Found {
    let mut sockets = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        if let Ok(text) = std::fs::read_to_string(table) {
            sockets.extend(text.lines().filter_map(parse_socket_line));
        }
    }
    holder_among(addr, &sockets)
}

/// One row of `/proc/net/tcp[6]`: local and remote address, state code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Socket {
    local: SocketAddr,
    remote: SocketAddr,
    state: u8,
}

/// The state code of a listening socket in `/proc/net/tcp`.
const TCP_LISTEN: u8 = 0x0A;

fn holder_among(addr: SocketAddr, sockets: &[Socket]) -> Found {
    let overlaps = |s: &&Socket| {
        s.local.port() == addr.port()
            && (s.local.ip() == addr.ip()
                || s.local.ip().is_unspecified()
                || addr.ip().is_unspecified()
                || same_v4(s.local.ip(), addr.ip()))
    };
    let holding: Vec<&Socket> = sockets.iter().filter(overlaps).collect();
    if holding.iter().any(|s| s.state == TCP_LISTEN) {
        return Found::Listener;
    }
    match holding.first() {
        Some(s) => Found::Connection {
            remote: s.remote,
            state: state_name(s.state),
        },
        None => Found::Unknown,
    }
}

/// An IPv4 address and its IPv4-mapped IPv6 form are the same address.
fn same_v4(a: IpAddr, b: IpAddr) -> bool {
    let v4 = |ip: IpAddr| match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    };
    v4(a).is_some() && v4(a) == v4(b)
}

fn state_name(code: u8) -> &'static str {
    match code {
        0x01 => "established",
        0x02 => "connecting",
        0x03 => "being accepted",
        0x04..=0x05 | 0x0B => "closing",
        0x06 => "time-wait",
        0x07 => "closed",
        0x08 => "closed by the other end",
        0x09 => "last ack",
        _ => "unknown state",
    }
}

/// Parses `  0: 0100007F:1F90 0100007F:A2B4 01 ...`; `None` for the header.
fn parse_socket_line(line: &str) -> Option<Socket> {
    let mut fields = line.split_whitespace().skip(1);
    let local = parse_socket_addr(fields.next()?)?;
    let remote = parse_socket_addr(fields.next()?)?;
    let state = u8::from_str_radix(fields.next()?, 16).ok()?;
    Some(Socket {
        local,
        remote,
        state,
    })
}

/// `ADDR:PORT` in hex, the address as the kernel's 32-bit words in host order
/// (little-endian on the machines this runs on).
fn parse_socket_addr(text: &str) -> Option<SocketAddr> {
    let (ip, port) = text.split_once(':')?;
    let port = u16::from_str_radix(port, 16).ok()?;
    let word = |i: usize| -> Option<[u8; 4]> {
        let hex = ip.get(i * 8..i * 8 + 8)?;
        Some(u32::from_str_radix(hex, 16).ok()?.to_le_bytes())
    };
    let ip = match ip.len() {
        8 => IpAddr::V4(Ipv4Addr::from(word(0)?)),
        32 => {
            let mut octets = [0u8; 16];
            for i in 0..4 {
                octets[i * 4..i * 4 + 4].copy_from_slice(&word(i)?);
            }
            IpAddr::V6(Ipv6Addr::from(octets))
        }
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

/// As [`ensure_free`], when the model's command is given the port of its
/// proxy address in its command line or environment (see the module notes).
pub(crate) async fn ensure_free_for(
    proxy: &str,
    cmd: &str,
    env: &[(String, String)],
) -> Result<(), PortInUse> {
    let Some((_, port)) = host_and_port(proxy) else {
        return Ok(());
    };
    let given = mentions_port(cmd, port) || env.iter().any(|(_, value)| mentions_port(value, port));
    if given {
        ensure_free(proxy).await
    } else {
        Ok(())
    }
}

/// Whether `text` contains `port` as a whole number (not part of a longer one).
fn mentions_port(text: &str, port: u16) -> bool {
    text.split(|c: char| !c.is_ascii_digit()).any(|digits| {
        digits.parse::<u32>().ok() == Some(u32::from(port)) && !digits.starts_with('0')
    })
}

fn host_and_port(proxy: &str) -> Option<(String, u16)> {
    let uri: Uri = proxy.parse().ok()?;
    let authority = uri.authority()?;
    let port = authority.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    })?;
    if port == 0 {
        return None;
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_owned();
    Some((host, port))
}

async fn resolve(host: &str, port: u16) -> Vec<IpAddr> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return vec![ip];
    }
    match tokio::time::timeout(LOOKUP_LIMIT, tokio::net::lookup_host((host, port))).await {
        Ok(Ok(addrs)) => {
            let mut ips: Vec<IpAddr> = addrs.map(|a| a.ip()).collect();
            ips.dedup();
            ips
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_and_port_come_from_the_proxy_url() {
        assert_eq!(
            host_and_port("http://127.0.0.1:5800"),
            Some(("127.0.0.1".into(), 5800))
        );
        assert_eq!(
            host_and_port("http://[::1]:81/v1"),
            Some(("::1".into(), 81))
        );
        assert_eq!(
            host_and_port("http://localhost"),
            Some(("localhost".into(), 80))
        );
        assert_eq!(
            host_and_port("https://example"),
            Some(("example".into(), 443))
        );
        assert_eq!(host_and_port("not a url"), None);
    }

    #[tokio::test]
    async fn a_listening_port_is_in_use_and_a_free_one_is_not() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let err = ensure_free(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_err();
        assert_eq!(err.port, port);
        assert_eq!(err.holder, Found::Listener);
        assert!(
            err.to_string().contains(&format!(
                "port {port} is already in use: another process listens on 127.0.0.1:{port}"
            )),
            "{err}"
        );
        drop(listener);
        ensure_free(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
    }

    #[tokio::test]
    async fn a_port_held_by_a_connection_is_named_as_one_not_as_another_server() {
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let remote = server.local_addr().unwrap();
        // An outgoing connection: the system picks its local port.
        let client = std::net::TcpStream::connect(remote).unwrap();
        let port = client.local_addr().unwrap().port();
        let err = ensure_free(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap_err();
        // The system may give the same local port to other processes' connections to
        // other addresses (or keep an old one in time-wait), so under parallel tests
        // the row named can be one of those: it is a connection either way.
        let Found::Connection { remote: named, .. } = err.holder else {
            panic!("named {:?}, not a connection", err.holder);
        };
        let text = err.to_string();
        assert!(
            text.contains(&format!(
                "port {port} is in use, not by a server: it is the local end of a connection to {named} ("
            )),
            "{text}"
        );
        if named == remote {
            assert_eq!(
                err.holder,
                Found::Connection {
                    remote,
                    state: "established"
                }
            );
        }
        assert!(!text.contains("another process listens"), "{text}");
        if let Some(range) = ephemeral_ports().filter(|r| r.contains(&port)) {
            assert!(
                text.contains(&format!("({}-{})", range.start(), range.end())),
                "{text}"
            );
        }
        drop(client);
    }

    #[test]
    fn the_kernels_socket_rows_and_port_range_are_read() {
        let v4 =
            "   1: 0100007F:1F90 0100007F:A2B4 01 00000000:00000000 00:00000000 00000000  0 0 1";
        assert_eq!(
            parse_socket_line(v4),
            Some(Socket {
                local: "127.0.0.1:8080".parse().unwrap(),
                remote: "127.0.0.1:41652".parse().unwrap(),
                state: 1,
            })
        );
        let v6 = "   0: 00000000000000000000000001000000:1F90 00000000000000000000000000000000:0000 0A 0";
        let row = parse_socket_line(v6).unwrap();
        assert_eq!(row.local, "[::1]:8080".parse().unwrap());
        assert_eq!(row.state, TCP_LISTEN);
        assert_eq!(
            parse_socket_line("  sl  local_address rem_address   st"),
            None
        );
        assert_eq!(parse_port_range("32768\t60999\n"), Some(32768..=60999));
        assert_eq!(parse_port_range("9 1"), None);
        let listen = Socket {
            local: "0.0.0.0:8080".parse().unwrap(),
            remote: "0.0.0.0:0".parse().unwrap(),
            state: TCP_LISTEN,
        };
        let outgoing = Socket {
            local: "127.0.0.1:8080".parse().unwrap(),
            remote: "127.0.0.1:9000".parse().unwrap(),
            state: 6,
        };
        let addr: SocketAddr = "127.0.0.1:8080".parse().unwrap();
        assert_eq!(holder_among(addr, &[outgoing, listen]), Found::Listener);
        assert_eq!(
            holder_among(addr, &[outgoing]),
            Found::Connection {
                remote: outgoing.remote,
                state: "time-wait"
            }
        );
        assert_eq!(
            holder_among("127.0.0.1:8081".parse().unwrap(), &[outgoing]),
            Found::Unknown
        );
    }

    #[tokio::test]
    async fn a_port_listening_on_every_address_is_in_use_on_loopback() {
        let listener = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(
            ensure_free(&format!("http://localhost:{port}"))
                .await
                .is_err()
        );
    }

    #[test]
    fn a_port_is_mentioned_only_as_a_whole_number() {
        assert!(mentions_port("llama-server --port 5800 -m x.gguf", 5800));
        assert!(mentions_port("docker run -p 5800:8080 image", 5800));
        assert!(mentions_port("--host=127.0.0.1:5800", 5800));
        assert!(!mentions_port("docker start -a model", 5800));
        assert!(!mentions_port("llama-server --port 15800", 5800));
        assert!(!mentions_port("llama-server --port 58001", 5800));
        assert!(!mentions_port("llama-server --port 05800", 5800));
    }

    #[tokio::test]
    async fn a_command_not_given_its_port_attaches_and_the_port_is_not_checked() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = format!("http://127.0.0.1:{port}");
        ensure_free_for(&proxy, "sleep infinity", &[])
            .await
            .unwrap();
        let err = ensure_free_for(&proxy, &format!("llama-server --port {port}"), &[])
            .await
            .unwrap_err();
        assert_eq!(err.port, port);
        let env = [("PORT".to_owned(), port.to_string())];
        assert!(ensure_free_for(&proxy, "my-server", &env).await.is_err());
    }

    #[tokio::test]
    async fn an_address_that_is_not_local_is_not_checked() {
        // TEST-NET-1: never a local address, so the bind is refused as unavailable.
        ensure_free("http://192.0.2.1:5800").await.unwrap();
    }
}
