//! Authorization: the OAuth flow. (The challenge a server sends is read in
//! [`proto::challenge`](crate::proto::challenge); token providers live with the HTTP driver
//! that calls them.)

#[cfg(feature = "http")]
pub mod oauth;
