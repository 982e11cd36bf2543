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

use std::net::{IpAddr, SocketAddr, TcpListener};
use std::time::Duration;

use http::Uri;

/// Longest a host name lookup for the check may take; a slower resolver means the
/// check is skipped, not the start delayed.
const LOOKUP_LIMIT: Duration = Duration::from_secs(2);

/// The model's address is already bound by another process.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "port {port} is already in use: another process listens on {addr} before the model's \
     command started (an upstream left running by another server, or another model on the \
     same port); stop that process or give the model another port"
)]
pub(crate) struct PortInUse {
    pub(crate) port: u16,
    pub(crate) addr: SocketAddr,
}

/// Checks that nothing listens on the address of `proxy` (an `http://host:port`
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
                return Err(PortInUse { port, addr });
            }
            // Bound (and released at once: std sets SO_REUSEADDR, so the model can
            // bind it right after), or not ours to bind.
            _ => {}
        }
    }
    Ok(())
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
        assert!(err.to_string().contains(&format!("port {port}")), "{err}");
        drop(listener);
        ensure_free(&format!("http://127.0.0.1:{port}"))
            .await
            .unwrap();
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
