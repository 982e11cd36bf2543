//! Models whose upstream is this server itself.
//!
//! A `proxy` (or a `${PORT}` allocated from `startPort`) equal to the listen
//! address sends each request back into the server, which routes it to the
//! same model again: one request fans out into nested ones until something
//! gives out. The configuration cannot know the listen address (it is a
//! command-line setting), so the check takes it as an argument; it is made
//! at start, on every reload and by `--check-config`. Names other than
//! `localhost` are not resolved here; the hop header catches those loops at
//! run time.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use http::Uri;

use super::model::ModelConfig;
use super::types::Config;

/// A model whose `proxy` is the server's own listen address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "model {model}: proxy {proxy} is this server's own listen address ({listen}), so its \
     requests would come back to the server; {advice}"
)]
#[non_exhaustive]
pub struct SelfProxy {
    /// The model ID.
    pub model: String,
    /// Its `proxy` URL.
    pub proxy: String,
    /// The listen address it equals.
    pub listen: SocketAddr,
    advice: String,
}

impl Config {
    /// The models whose upstream would be this server, listening on `listen`
    /// (`0.0.0.0` / `[::]` for every interface).
    #[must_use]
    pub fn self_proxies(&self, listen: SocketAddr) -> Vec<SelfProxy> {
        self.models
            .iter()
            .filter(|model| points_at(&model.proxy, listen))
            .map(|model| SelfProxy {
                model: model.id.clone(),
                proxy: model.proxy.clone(),
                listen,
                advice: advice(self, model),
            })
            .collect()
    }
}

fn advice(config: &Config, model: &ModelConfig) -> String {
    match model.port {
        Some(port) => format!(
            "its ${{PORT}} {port} is allocated from startPort {}: set startPort to a port \
             the server does not listen on",
            config.start_port
        ),
        None => "give the model's upstream another port".to_owned(),
    }
}

/// Whether a connection to `proxy` would reach a server listening on `listen`.
fn points_at(proxy: &str, listen: SocketAddr) -> bool {
    let Ok(uri) = proxy.parse::<Uri>() else {
        return false;
    };
    let Some(authority) = uri.authority() else {
        return false;
    };
    let port = authority.port_u16().or(match uri.scheme_str() {
        Some("https") => Some(443),
        Some("http") => Some(80),
        _ => None,
    });
    if port != Some(listen.port()) {
        return false;
    }
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']');
    let targets: Vec<IpAddr> = if host.eq_ignore_ascii_case("localhost") {
        vec![
            IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(Ipv6Addr::LOCALHOST),
        ]
    } else if let Ok(ip) = host.parse::<IpAddr>() {
        vec![ip]
    } else {
        return false;
    };
    let bound = listen.ip();
    targets.into_iter().any(|target| {
        target == bound
            // Listening everywhere takes loopback connections too.
            || (bound.is_unspecified() && (target.is_loopback() || target.is_unspecified()))
            // Connecting to 0.0.0.0 reaches this host over loopback.
            || (target.is_unspecified() && bound.is_loopback())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().unwrap()
    }

    #[test]
    fn the_same_address_or_a_loopback_name_for_it_points_back_at_the_server() {
        let loopback = addr("127.0.0.1:8080");
        assert!(points_at("http://127.0.0.1:8080", loopback));
        assert!(points_at("http://localhost:8080/", loopback));
        assert!(points_at("http://LOCALHOST:8080", loopback));
        assert!(points_at("http://0.0.0.0:8080", loopback));
        assert!(points_at("http://[::1]:8080", addr("[::1]:8080")));
        assert!(points_at("http://localhost:80", addr("127.0.0.1:80")));
    }

    #[test]
    fn every_interface_includes_loopback_and_the_machines_own_address() {
        let everywhere = addr("0.0.0.0:8080");
        assert!(points_at("http://127.0.0.1:8080", everywhere));
        assert!(points_at("http://localhost:8080", everywhere));
        assert!(points_at("http://[::1]:8080", addr("[::]:8080")));
    }

    #[test]
    fn another_port_host_or_unresolved_name_does_not() {
        let loopback = addr("127.0.0.1:8080");
        assert!(!points_at("http://127.0.0.1:8081", loopback));
        assert!(!points_at("http://192.0.2.7:8080", loopback));
        assert!(!points_at("http://gpu-box:8080", loopback));
        // A server bound to one LAN address is not reached over loopback.
        assert!(!points_at("http://127.0.0.1:8080", addr("192.0.2.7:8080")));
        assert!(!points_at("not a url", loopback));
    }
}
