//! Ports from the host into a session: a listener on the host's `127.0.0.1:<ephemeral>` whose
//! every connection is relayed, byte for byte (so a WebSocket upgrade passes), to a socket
//! connected to `127.0.0.1:<port>` inside the session's network namespace (made there by the
//! session's keeper, or by a thread that entered a container's namespace: `Inside`).

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::Arc;

use async_trait::async_trait;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// A network namespace sockets can be made in from outside it.
#[async_trait]
pub trait Inside: Send + Sync {
    /// A socket connected to `127.0.0.1:port` inside (non-blocking).
    async fn connect(&self, port: u16) -> io::Result<OwnedFd>;
    /// A non-blocking listener on `127.0.0.1:port` (0: any) inside, and its port.
    async fn listen(&self, port: u16) -> io::Result<(OwnedFd, u16)>;
}

#[async_trait]
impl Inside for super::Keeper {
    async fn connect(&self, port: u16) -> io::Result<OwnedFd> {
        super::Keeper::connect(self, port).await
    }

    async fn listen(&self, port: u16) -> io::Result<(OwnedFd, u16)> {
        super::Keeper::listen(self, port).await
    }
}

/// Waits (up to 10 seconds) for a non-blocking connect started on `fd` to finish.
pub async fn finish_connect(fd: OwnedFd) -> io::Result<OwnedFd> {
    let stream = std::net::TcpStream::from(fd);
    stream.set_nonblocking(true)?;
    let stream = TcpStream::from_std(stream)?;
    match tokio::time::timeout(std::time::Duration::from_secs(10), stream.writable()).await {
        Err(_) => return Err(io::Error::new(io::ErrorKind::TimedOut, "the port inside the session did not answer")),
        Ok(r) => r?,
    }
    if let Some(e) = stream.take_error()? {
        return Err(e);
    }
    stream.peer_addr()?;
    Ok(OwnedFd::from(stream.into_std()?))
}

/// One forwarded port; closing it (or dropping it) ends its listener and every relayed connection.
pub struct Forwarder {
    port: u16,
    local: SocketAddr,
    stop: CancellationToken,
}

impl Forwarder {
    /// Forwards `127.0.0.1:<ephemeral>` on the host to `port` inside.
    pub async fn start(inside: Arc<dyn Inside>, port: u16) -> std::io::Result<Forwarder> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let local = listener.local_addr()?;
        let stop = CancellationToken::new();
        let token = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = token.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((client, _)) = accepted else { continue };
                let (inside, token) = (inside.clone(), token.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = relay(inside, port, client) => {}
                    }
                });
            }
        });
        Ok(Forwarder { port, local, stop })
    }

    /// The port inside the session.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host address that reaches it.
    pub fn local(&self) -> SocketAddr {
        self.local
    }

    pub fn close(&self) {
        self.stop.cancel();
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// Relays one connection; a port nothing listens on inside closes the client's connection.
async fn relay(inside: Arc<dyn Inside>, port: u16, mut client: TcpStream) {
    let Ok(inner) = inside.connect(port).await else { return };
    let inner = std::net::TcpStream::from(inner);
    if inner.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut inner) = TcpStream::from_std(inner) else { return };
    let _ = tokio::io::copy_bidirectional(&mut client, &mut inner).await;
}
