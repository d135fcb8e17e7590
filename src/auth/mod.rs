//! Authorization: what a server's challenge asks for. (Token providers live with the HTTP
//! driver that calls them.)

pub(crate) mod challenge;
#[cfg(feature = "http")]
pub mod oauth;

pub use challenge::AuthChallenge;
