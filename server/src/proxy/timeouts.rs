//! Per-upstream transport timeouts (llama-swap's per-model `timeouts`).

use std::time::Duration;

/// The `responseHeader` timeout of a model that sets none: 30 minutes, longer
/// than any non-streaming generation should take, so that an upstream that
/// never answers frees its request's slot (504) instead of holding it forever.
pub const DEFAULT_RESPONSE_HEADER: Duration = Duration::from_secs(30 * 60);

/// The `bodyIdle` timeout of a model that sets none: 60 s, nginx's
/// `proxy_read_timeout`. A generation that streams sends a token at least every
/// few seconds, so a minute of silence after the headers means a stalled
/// upstream, not a slow one.
pub(crate) const DEFAULT_BODY_IDLE: Duration = Duration::from_secs(60);

/// The transport timeouts of one upstream. `None` disables a timeout (a `0` in
/// the config). The defaults are llama-swap's, which are Go's
/// `http.DefaultTransport`'s, except `responseHeader`
/// ([`DEFAULT_RESPONSE_HEADER`] where llama-swap has none) and `bodyIdle`
/// (ours, `DEFAULT_BODY_IDLE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Timeouts {
    /// `connect` (default 30 s): establishing the TCP connection.
    pub connect: Option<Duration>,
    /// `keepalive` (default 30 s): the TCP keep-alive interval of upstream
    /// connections; `None` leaves keep-alive probes off.
    pub keepalive: Option<Duration>,
    /// `responseHeader` (default [`DEFAULT_RESPONSE_HEADER`], 30 min; llama-swap
    /// has none): from the request being fully sent to the upstream's response
    /// headers. Long generations that stream are not affected once headers
    /// arrive; a non-streaming request must answer in time, so keep it generous.
    pub response_header: Option<Duration>,
    /// `tlsHandshake` (default 10 s): the TLS handshake of an `https://` upstream.
    pub tls_handshake: Option<Duration>,
    /// `expectContinue` (default 1 s): how long a request carrying
    /// `Expect: 100-continue` holds its body back waiting for the upstream's
    /// `100 Continue`; `None` sends the body at once.
    pub expect_continue: Option<Duration>,
    /// `idleConn` (default 90 s): how long an idle pooled connection is kept.
    pub idle_conn: Option<Duration>,
    /// `bodyIdle` (default `DEFAULT_BODY_IDLE`, 60 s; llama-swap has none):
    /// the longest silence of a response body once its headers arrived. When
    /// it runs out the response ends (an event stream with an error frame, any
    /// other body cut off), the upstream connection is closed and the request
    /// releases its model.
    pub body_idle: Option<Duration>,
}

impl Default for Timeouts {
    fn default() -> Self {
        Self {
            connect: Some(Duration::from_secs(30)),
            keepalive: Some(Duration::from_secs(30)),
            response_header: Some(DEFAULT_RESPONSE_HEADER),
            tls_handshake: Some(Duration::from_secs(10)),
            expect_continue: Some(Duration::from_secs(1)),
            idle_conn: Some(Duration::from_secs(90)),
            body_idle: Some(DEFAULT_BODY_IDLE),
        }
    }
}

impl Timeouts {
    /// Sets `connect`.
    #[must_use]
    pub fn connect(mut self, timeout: Option<Duration>) -> Self {
        self.connect = timeout;
        self
    }

    /// Sets `keepalive`.
    #[must_use]
    pub fn keepalive(mut self, interval: Option<Duration>) -> Self {
        self.keepalive = interval;
        self
    }

    /// Sets `responseHeader`.
    #[must_use]
    pub fn response_header(mut self, timeout: Option<Duration>) -> Self {
        self.response_header = timeout;
        self
    }

    /// Sets `tlsHandshake`.
    #[must_use]
    pub fn tls_handshake(mut self, timeout: Option<Duration>) -> Self {
        self.tls_handshake = timeout;
        self
    }

    /// Sets `expectContinue`.
    #[must_use]
    pub fn expect_continue(mut self, timeout: Option<Duration>) -> Self {
        self.expect_continue = timeout;
        self
    }

    /// Sets `idleConn`.
    #[must_use]
    pub fn idle_conn(mut self, timeout: Option<Duration>) -> Self {
        self.idle_conn = timeout;
        self
    }

    /// Sets `bodyIdle`.
    #[must_use]
    pub fn body_idle(mut self, timeout: Option<Duration>) -> Self {
        self.body_idle = timeout;
        self
    }
}
