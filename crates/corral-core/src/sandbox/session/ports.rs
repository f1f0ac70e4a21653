//! Ports from the host into a session: a listener on the host's `127.0.0.1:<ephemeral>` whose
//! every connection is relayed, byte for byte (so a WebSocket upgrade passes), to a socket
//! connected to `127.0.0.1:<port>` inside the session's network namespace (made there by the
//! session's keeper, or by a thread that entered a container's namespace: `Inside`).
//!
//! A socket keeps the network namespace it was made in. So a forwarder holds a few sockets made
//! inside ahead (`Spares`, where the `Inside` makes them) and connects one itself for each
//! connection: no request to the keeper on a connection's path.

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

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
    /// Up to `n` non-blocking TCP sockets made inside, not connected; none where this `Inside`
    /// does not make them ahead (each connection then asks `connect`).
    async fn sockets(&self, _n: u16) -> io::Result<Vec<OwnedFd>> {
        Ok(Vec::new())
    }
}

#[async_trait]
impl Inside for super::Keeper {
    async fn connect(&self, port: u16) -> io::Result<OwnedFd> {
        super::Keeper::connect(self, port).await
    }

    async fn listen(&self, port: u16) -> io::Result<(OwnedFd, u16)> {
        super::Keeper::listen(self, port).await
    }

    async fn sockets(&self, n: u16) -> io::Result<Vec<OwnedFd>> {
        super::Keeper::sockets(self, n).await
    }
}

/// How many sockets a forwarder asks for at once; it asks again when half are taken.
const SPARES: usize = 16;

/// A forwarder's sockets made inside ahead of its connections.
struct Spares {
    inside: Arc<dyn Inside>,
    fds: Mutex<Vec<OwnedFd>>,
    /// A request for more is under way, or the `Inside` makes none: none is asked for.
    asking: AtomicBool,
}

impl Spares {
    /// None yet: the first connection asks for them.
    fn new(inside: Arc<dyn Inside>) -> Arc<Spares> {
        Arc::new(Spares { inside, fds: Mutex::new(Vec::new()), asking: AtomicBool::new(false) })
    }

    /// Asks for more in the background, unless a request is under way.
    fn refill(self: &Arc<Self>) {
        if self.asking.swap(true, Ordering::AcqRel) {
            return;
        }
        let spares = self.clone();
        tokio::spawn(async move {
            match spares.inside.sockets(SPARES as u16).await {
                // An `Inside` that makes none is not asked again; connections ask `connect`.
                Ok(made) if made.is_empty() => return,
                Ok(made) => spares.fds.lock().unwrap_or_else(|p| p.into_inner()).extend(made),
                // Asked again by a later connection (the keeper out of descriptors a moment).
                Err(_) => {}
            }
            spares.asking.store(false, Ordering::Release);
        });
    }

    /// A socket connected to `127.0.0.1:port` inside: a spare connected here, or, with none left,
    /// one the `Inside` connects.
    async fn connect(self: &Arc<Self>, port: u16) -> io::Result<OwnedFd> {
        let (spare, left) = {
            let mut fds = self.fds.lock().unwrap_or_else(|p| p.into_inner());
            (fds.pop(), fds.len())
        };
        if left < SPARES / 2 {
            self.refill();
        }
        let Some(fd) = spare else { return self.inside.connect(port).await };
        let socket = socket2::Socket::from(fd);
        let at: SocketAddr = (std::net::Ipv4Addr::LOCALHOST, port).into();
        match socket.connect(&at.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::EINPROGRESS) => {}
            Err(e) => return Err(e),
        }
        finish_connect(OwnedFd::from(socket)).await
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
        let spares = Spares::new(inside);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    _ = token.cancelled() => return,
                    a = listener.accept() => a,
                };
                let Ok((client, _)) = accepted else { continue };
                let (spares, token) = (spares.clone(), token.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = relay(&spares, port, client) => {}
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
async fn relay(spares: &Arc<Spares>, port: u16, mut client: TcpStream) {
    let Ok(inner) = spares.connect(port).await else { return };
    let inner = std::net::TcpStream::from(inner);
    if inner.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut inner) = TcpStream::from_std(inner) else { return };
    let _ = tokio::io::copy_bidirectional(&mut client, &mut inner).await;
}
