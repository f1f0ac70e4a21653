//! Ports from the host into a session: a listener on the host's `127.0.0.1:<ephemeral>` whose
//! every connection is relayed, byte for byte (so a WebSocket upgrade passes), to a socket the
//! session's keeper connected to `127.0.0.1:<port>` inside the session's network namespace.

use std::net::SocketAddr;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::Keeper;

/// One forwarded port; closing it (or dropping it) ends its listener and every relayed connection.
pub struct Forwarder {
    port: u16,
    local: SocketAddr,
    stop: CancellationToken,
}

impl Forwarder {
    /// Forwards `127.0.0.1:<ephemeral>` on the host to `port` inside the session of `keeper`.
    pub async fn start(keeper: Keeper, port: u16) -> std::io::Result<Forwarder> {
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
                let (keeper, token) = (keeper.clone(), token.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = token.cancelled() => {}
                        _ = relay(keeper, port, client) => {}
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
async fn relay(keeper: Keeper, port: u16, mut client: TcpStream) {
    let Ok(inner) = keeper.connect(port).await else { return };
    let inner = std::net::TcpStream::from(inner);
    if inner.set_nonblocking(true).is_err() {
        return;
    }
    let Ok(mut inner) = TcpStream::from_std(inner) else { return };
    let _ = tokio::io::copy_bidirectional(&mut client, &mut inner).await;
}
