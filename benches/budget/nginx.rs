//! nginx as the reference reverse proxy: a generated config in a temporary directory,
//! run in the foreground as our child (no system service, no root config), with
//! keep-alive on both sides so it is measured at its best.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use tokio::process::Command;

use crate::Res;
use crate::procs::{Proc, free_port, listening};

/// The nginx executable: `$NGINX`, else on `PATH`, else Debian's `/usr/sbin/nginx`.
pub(crate) fn find() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("NGINX") {
        return Some(PathBuf::from(path));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join("nginx"))
        .find(|candidate| candidate.is_file())
}

/// A generated configuration: the settings every nginx of the benchmark shares
/// (its files under `dir`, no access log, long keep-alive), then `http_block`
/// inside `http { }`.
fn with_common(dir: &Path, http_block: &str) -> String {
    let dir = dir.display();
    format!(
        r#"daemon off;
master_process on;
worker_processes auto;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
events {{ worker_connections 4096; }}
http {{
    access_log off;
    client_body_temp_path {dir}/body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    keepalive_requests 1000000;
    keepalive_timeout 120s;
{http_block}}}
"#
    )
}

/// The generated configuration for proxying to `upstream` on `listen`.
fn config(dir: &Path, listen: SocketAddr, upstream: SocketAddr) -> String {
    with_common(
        dir,
        &format!(
            r#"    upstream mock {{
        server {upstream};
        keepalive 128;
        keepalive_requests 1000000;
    }}
    server {{
        listen {listen} backlog=4096;
        location / {{
            proxy_pass http://mock;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_buffering off;
        }}
    }}
"#
        ),
    )
}

/// The generated configuration of an upstream that answers every request
/// itself: `200` with `body` as JSON.
fn answering_config(dir: &Path, listen: SocketAddr, body: &str) -> String {
    with_common(
        dir,
        &format!(
            r#"    server {{
        listen {listen} backlog=4096;
        location / {{
            default_type application/json;
            return 200 '{body}';
        }}
    }}
"#
        ),
    )
}

/// Starts nginx answering every request with `200` and `body` (JSON, no
/// single quote); returns it and its address.
pub(crate) async fn start_answering(
    nginx: &Path,
    dir: &Path,
    body: &str,
) -> Res<(Proc, SocketAddr)> {
    if body.contains('\'') {
        return Err("the answer must not contain a single quote".into());
    }
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    launch(nginx, dir, listen, &answering_config(dir, listen, body)).await
}

/// Starts nginx proxying to `upstream`; returns it and its address.
pub(crate) async fn start(
    nginx: &Path,
    dir: &Path,
    upstream: SocketAddr,
) -> Res<(Proc, SocketAddr)> {
    let listen: SocketAddr = format!("127.0.0.1:{}", free_port()?).parse()?;
    launch(nginx, dir, listen, &config(dir, listen, upstream)).await
}

async fn launch(
    nginx: &Path,
    dir: &Path,
    listen: SocketAddr,
    config: &str,
) -> Res<(Proc, SocketAddr)> {
    // Workers drop root privileges to `nobody`; they must be able to use the temp dirs.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    }
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config)?;
    let mut command = Command::new(nginx);
    command
        .arg("-p")
        .arg(dir)
        .arg("-e")
        .arg(dir.join("error.log"))
        .arg("-c")
        .arg(&conf);
    let proc = listening("nginx", command, listen, &dir.join("nginx.out")).await?;
    Ok((proc, listen))
}
