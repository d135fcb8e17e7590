//! TLS for the HTTP driver: the only module that names rustls types (pinned to 0.23, using its
//! buffered `read_tls` / `process_new_packets` / `write_tls` API, which works on any
//! non-blocking socket).
//!
//! Certificates are always verified: webpki roots by default, or a CA file the host names.
//! There is an explicit, loudly named escape hatch for test servers,
//! [`TlsOptions::dangerous_accept_any_certificate`], which logs a warning on every connect.

use std::fmt;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, SignatureScheme,
};

use crate::error::TlsFailure;

/// How to trust servers and, optionally, how to prove who we are (mTLS).
#[derive(Debug, Clone, Default)]
pub struct TlsOptions {
    /// PEM file of CA certificates to trust instead of the webpki roots.
    pub ca_file: Option<PathBuf>,
    /// PEM certificate chain and PEM private key for client authentication.
    pub client_cert: Option<(PathBuf, PathBuf)>,
    /// Verify nothing about the server's certificate. For throwaway test servers only: every
    /// connect logs a warning.
    pub dangerous_accept_any_certificate: bool,
}

/// Why TLS could not be set up from the options.
#[derive(Debug)]
#[non_exhaustive]
pub enum TlsSetupError {
    /// A file could not be read or held no usable PEM item.
    Pem(PathBuf, String),
    /// rustls refused the configuration (for example a key that does not match the chain).
    Config(String),
}

impl fmt::Display for TlsSetupError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Pem(p, e) => write!(f, "cannot use {}: {e}", p.display()),
            Self::Config(e) => write!(f, "TLS configuration refused: {e}"),
        }
    }
}

impl std::error::Error for TlsSetupError {}

/// A built client configuration, shared by every connection to one server.
#[derive(Clone)]
pub(crate) struct TlsConfig {
    config: Arc<ClientConfig>,
    insecure: bool,
}

impl fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConfig").field("insecure", &self.insecure).finish_non_exhaustive()
    }
}

/// rustls' ring provider: ring builds with a C compiler alone, where aws-lc-rs also needs
/// cmake, which small boards' toolchains often lack. rustls 0.23.48 deprecates it because ring
/// has no post-quantum key exchange: a property of the provider chosen, not a misuse.
#[allow(deprecated)]
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsConfig {
    /// Builds the configuration once, when the server is added.
    pub(crate) fn new(opts: &TlsOptions) -> Result<Self, TlsSetupError> {
        let builder = ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| TlsSetupError::Config(e.to_string()))?;
        let builder = if opts.dangerous_accept_any_certificate {
            builder.dangerous().with_custom_certificate_verifier(Arc::new(AcceptAnything))
        } else {
            builder.with_root_certificates(roots(opts)?)
        };
        let mut config = match &opts.client_cert {
            Some((chain, key)) => {
                let certs = read_certs(chain)?;
                let key = PrivateKeyDer::from_pem_file(key)
                    .map_err(|e| TlsSetupError::Pem(key.clone(), e.to_string()))?;
                builder
                    .with_client_auth_cert(certs, key)
                    .map_err(|e| TlsSetupError::Config(e.to_string()))?
            }
            None => builder.with_no_client_auth(),
        };
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Self { config: Arc::new(config), insecure: opts.dangerous_accept_any_certificate })
    }

    /// Starts a session for `host` (SNI and the name the certificate must carry).
    pub(crate) fn session(&self, host: &str) -> Result<TlsSession, TlsFailure> {
        if self.insecure {
            log::warn!("TLS certificate verification is DISABLED for {host} (dangerous_accept_any_certificate)");
        }
        let name = ServerName::try_from(host.to_owned()).map_err(|_| TlsFailure::WrongHostName)?;
        let conn = ClientConnection::new(Arc::clone(&self.config), name)
            .map_err(|_| TlsFailure::Handshake)?;
        Ok(TlsSession { conn })
    }
}

fn read_certs(path: &PathBuf) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    let certs: Result<Vec<_>, _> = CertificateDer::pem_file_iter(path)
        .map_err(|e| TlsSetupError::Pem(path.clone(), e.to_string()))?
        .collect();
    let certs = certs.map_err(|e| TlsSetupError::Pem(path.clone(), e.to_string()))?;
    if certs.is_empty() {
        return Err(TlsSetupError::Pem(path.clone(), "no certificate in file".into()));
    }
    Ok(certs)
}

fn roots(opts: &TlsOptions) -> Result<RootCertStore, TlsSetupError> {
    let mut roots = RootCertStore::empty();
    match &opts.ca_file {
        Some(path) => {
            for cert in read_certs(path)? {
                roots.add(cert).map_err(|e| TlsSetupError::Pem(path.clone(), e.to_string()))?;
            }
        }
        None => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
    }
    Ok(roots)
}

/// One connection's TLS state over a non-blocking socket.
pub(crate) struct TlsSession {
    conn: ClientConnection,
}

impl fmt::Debug for TlsSession {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsSession").field("handshaking", &self.conn.is_handshaking()).finish()
    }
}

impl TlsSession {
    /// Reads ciphertext from the socket and decrypts it; the plaintext goes to `take`, which
    /// reads it from the reader it is given (once per call) and says how many bytes it took;
    /// returns their total. `Ok(None)` means the peer closed the connection. Stops once
    /// `most` plaintext bytes came (a record more at worst), so a server sending without
    /// pause cannot keep it reading: the socket may then hold more, and no new edge says so.
    pub(crate) fn read<S: Read>(
        &mut self,
        sock: &mut S,
        most: usize,
        mut take: impl FnMut(&mut dyn Read) -> io::Result<usize>,
    ) -> io::Result<Option<usize>> {
        let mut total = 0;
        loop {
            if total >= most {
                return Ok(Some(total));
            }
            match self.conn.read_tls(sock) {
                Ok(0) => {
                    self.process()?;
                    total += self.drain_plaintext(&mut take)?;
                    return Ok(if total == 0 { None } else { Some(total) });
                }
                Ok(_) => {
                    self.process()?;
                    total += self.drain_plaintext(&mut take)?;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Some(total)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }

    fn process(&mut self) -> io::Result<()> {
        self.conn
            .process_new_packets()
            .map(|_| ())
            .map_err(|e| io::Error::other(TlsError(classify(&e))))
    }

    /// Hands the decrypted plaintext to `take` until none is left.
    fn drain_plaintext(
        &mut self,
        take: &mut impl FnMut(&mut dyn Read) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let mut n = 0;
        loop {
            match take(&mut self.conn.reader()) {
                Ok(0) => return Ok(n),
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(n),
                // A close without close_notify: treat as EOF, the HTTP layer judges truncation.
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(n),
                Err(e) => return Err(e),
            }
        }
    }

    /// Queues what it can of `data` for encryption and says how much: rustls holds at most its
    /// buffer limit (64 KiB), and takes the rest as the socket takes what it holds.
    pub(crate) fn write_plaintext(&mut self, data: &[u8]) -> io::Result<usize> {
        self.conn.writer().write(data)
    }

    /// `true` while ciphertext waits for the socket.
    pub(crate) fn wants_write(&self) -> bool {
        self.conn.wants_write()
    }

    /// Writes queued ciphertext to the socket until it would block.
    pub(crate) fn flush<S: Write>(&mut self, sock: &mut S) -> io::Result<()> {
        while self.conn.wants_write() {
            match self.conn.write_tls(sock) {
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `true` until the handshake is done.
    pub(crate) fn is_handshaking(&self) -> bool {
        self.conn.is_handshaking()
    }
}

/// A TLS failure carried inside an `io::Error`, so the driver can report it typed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TlsError(pub TlsFailure);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "TLS: {:?}", self.0)
    }
}

impl std::error::Error for TlsError {}

/// Finds a TLS failure inside an I/O error, if one is there.
pub(crate) fn tls_failure(e: &io::Error) -> Option<TlsFailure> {
    e.get_ref().and_then(|inner| inner.downcast_ref::<TlsError>()).map(|t| t.0)
}

fn classify(e: &rustls::Error) -> TlsFailure {
    use rustls::{CertificateError, Error};
    match e {
        Error::InvalidCertificate(CertificateError::NotValidForName)
        | Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. }) => {
            TlsFailure::WrongHostName
        }
        Error::InvalidCertificate(CertificateError::UnknownIssuer) => TlsFailure::UnknownIssuer,
        Error::InvalidCertificate(CertificateError::Expired)
        | Error::InvalidCertificate(CertificateError::ExpiredContext { .. })
        | Error::InvalidCertificate(CertificateError::NotValidYet)
        | Error::InvalidCertificate(CertificateError::NotValidYetContext { .. }) => {
            TlsFailure::Expired
        }
        Error::InvalidCertificate(_) => TlsFailure::BadCertificate,
        _ => TlsFailure::Handshake,
    }
}

/// The escape hatch: accepts any certificate (still checks signatures on the handshake).
#[derive(Debug)]
struct AcceptAnything;

impl ServerCertVerifier for AcceptAnything {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = provider().signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, &algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = provider().signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, &algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        provider().signature_verification_algorithms.supported_schemes()
    }
}
