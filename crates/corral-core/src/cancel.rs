//! The cancel token every long call takes (an abort signal, a timeout, a closed tool set). A leaf
//! of the crate, so the file tools and the shell share it without depending on each other.

pub type Cancel = tokio_util::sync::CancellationToken;
