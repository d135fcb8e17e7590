//! DPoP (RFC 9449, SEP-1932): sender-constrained tokens. The client holds an ES256 key, puts
//! a fresh proof JWT in a `DPoP` header on every token request and every request to the MCP
//! server, and presents the token with the `DPoP` scheme. The servers may demand a nonce
//! (`use_dpop_nonce` with a `DPoP-Nonce` header); the latest one of each is kept for the next
//! proofs.
//!
//! A proof is written into a buffer [`Dpop`] keeps: after the first, a proof costs one
//! signature and no allocation. The protected header (with the public key) is encoded once
//! per key.

use std::fmt;
use std::io::Write as _;

use ring::rand::{SecureRandom, SystemRandom};

use super::crypto::{JwtAlgorithm, KeyError, SigningKey};
use crate::codec::base64;

/// When the OAuth flow uses DPoP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum DpopMode {
    /// Never: bearer tokens only (the default).
    #[default]
    Off,
    /// When the authorization server lists `ES256` in `dpop_signing_alg_values_supported`;
    /// a token it still issues as `Bearer` is used as a bearer token.
    IfSupported,
    /// Always: every token request carries a proof, and a token that comes back unbound
    /// (`token_type` `Bearer`) fails the flow with
    /// [`AuthFailure::DpopUnbound`](super::AuthFailure::DpopUnbound).
    Required,
}

impl DpopMode {
    /// Reads a mode name: `off`, `ifSupported` (or `if-supported`), `required`.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "off" => Some(Self::Off),
            "ifSupported" | "if-supported" => Some(Self::IfSupported),
            "required" => Some(Self::Required),
            _ => None,
        }
    }
}

/// The client's DPoP key: ECDSA P-256 (`ES256`). One is generated per flow unless the host
/// supplies its own ([`OAuthConfig::dpop_key`](super::OAuthConfig::dpop_key)), for example
/// to keep tokens bound to it across restarts. `Debug` shows the key's thumbprint only.
pub struct DpopKey {
    key: SigningKey,
    /// base64url of the protected header, `{"typ":"dpop+jwt","alg":"ES256","jwk":{..}}`.
    header: Vec<u8>,
    /// The JWK SHA-256 thumbprint (RFC 7638), as the token's `cnf.jkt` names the key.
    thumbprint: String,
}

impl fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "DpopKey(ES256, jkt {})", self.thumbprint)
    }
}

impl DpopKey {
    /// A fresh key from the system random source.
    pub fn generate() -> Result<Self, KeyError> {
        Self::from_signing_key(SigningKey::generate_es256()?)
    }

    /// The host's key, a PKCS#8 `PRIVATE KEY` PEM block of a P-256 key.
    pub fn from_pkcs8_pem(pem: &str) -> Result<Self, KeyError> {
        Self::from_signing_key(SigningKey::from_pkcs8_pem(pem, JwtAlgorithm::Es256)?)
    }

    /// The host's key, already parsed; it must be an `ES256` key ([`KeyError::Key`] if not).
    pub fn from_signing_key(key: SigningKey) -> Result<Self, KeyError> {
        let point = match (key.alg(), key.ec_public_point()) {
            (JwtAlgorithm::Es256, Some(p)) if p.len() == 65 && p[0] == 4 => p,
            _ => return Err(KeyError::Key),
        };
        let (x, y) = (b64(&point[1..33]), b64(&point[33..65]));
        // RFC 7638 3.2: the required members, in lexicographic order, no whitespace.
        let jwk = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let thumbprint = b64(ring::digest::digest(&ring::digest::SHA256, jwk.as_bytes()).as_ref());
        let header = format!(r#"{{"typ":"dpop+jwt","alg":"ES256","jwk":{jwk}}}"#);
        let mut encoded = Vec::new();
        base64::url_safe_into(&mut encoded, header.as_bytes());
        Ok(Self { key, header: encoded, thumbprint })
    }

    /// The JWK SHA-256 thumbprint (RFC 7638) of the public key, base64url: what a bound
    /// token's `cnf.jkt` holds.
    pub fn thumbprint(&self) -> &str {
        &self.thumbprint
    }
}

fn b64(data: &[u8]) -> String {
    let mut out = Vec::new();
    base64::url_safe_into(&mut out, data);
    String::from_utf8(out).unwrap_or_default()
}

/// The longest nonce kept from a server; a longer one is ignored.
pub(crate) const MAX_NONCE: usize = 512;

/// Why a `DPoP-Nonce` header value was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NonceError {
    Empty,
    TooLong,
    /// A byte outside RFC 9449's `NQCHAR` (`%x21 / %x23-5B / %x5D-7E`).
    Byte(u8),
}

/// Reads a `DPoP-Nonce` header value (RFC 9449 8.1: `1*NQCHAR`), surrounding spaces and tabs
/// trimmed. What passes can go into a JSON string as it is.
pub(crate) fn parse_nonce(value: &[u8]) -> Result<&str, NonceError> {
    let start = value.iter().position(|b| !matches!(b, b' ' | b'\t')).unwrap_or(value.len());
    let end = value.iter().rposition(|b| !matches!(b, b' ' | b'\t')).map_or(start, |e| e + 1);
    let value = &value[start..end];
    if value.is_empty() {
        return Err(NonceError::Empty);
    }
    if value.len() > MAX_NONCE {
        return Err(NonceError::TooLong);
    }
    if let Some(&b) = value.iter().find(|&&b| !matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e)) {
        return Err(NonceError::Byte(b));
    }
    // All ASCII, checked just above.
    std::str::from_utf8(value).map_err(|_| NonceError::Byte(0))
}

/// A server's nonce, kept for the next proofs to it.
#[derive(Debug, Default)]
pub(crate) struct Nonce(Option<String>);

impl Nonce {
    /// Takes a `DPoP-Nonce` header value; `true` when it was usable (it replaced the last).
    pub(crate) fn update(&mut self, value: &[u8]) -> bool {
        match parse_nonce(value) {
            Ok(n) => {
                if self.0.as_deref() != Some(n) {
                    let kept = self.0.get_or_insert_with(String::new);
                    kept.clear();
                    kept.push_str(n);
                }
                true
            }
            Err(e) => {
                log::debug!("ignoring a DPoP-Nonce header: {e:?}");
                false
            }
        }
    }

    pub(crate) fn get(&self) -> Option<&str> {
        self.0.as_deref()
    }

    pub(crate) fn clear(&mut self) {
        self.0 = None;
    }
}

/// The key, the proof buffers, and the resource server's nonce, for one flow.
pub(crate) struct Dpop {
    pub(crate) mode: DpopMode,
    key: DpopKey,
    /// The claims JSON of the proof being built.
    claims: Vec<u8>,
    /// The last proof built.
    proof: Vec<u8>,
    /// `ath` for the current access token: base64url(SHA-256(token)).
    ath: Vec<u8>,
    /// The MCP server's nonce (RFC 9449 9).
    pub(crate) resource_nonce: Nonce,
}

impl fmt::Debug for Dpop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Dpop")
            .field("mode", &self.mode)
            .field("key", &self.key)
            .field("resource_nonce", &self.resource_nonce.get().is_some())
            .finish_non_exhaustive()
    }
}

impl Dpop {
    pub(crate) fn new(mode: DpopMode, key: DpopKey) -> Self {
        Self {
            mode,
            key,
            claims: Vec::with_capacity(512),
            proof: Vec::with_capacity(1024),
            ath: Vec::with_capacity(43),
            resource_nonce: Nonce::default(),
        }
    }

    pub(crate) fn thumbprint(&self) -> &str {
        self.key.thumbprint()
    }

    /// The access token changed: its `ath` is computed once here.
    pub(crate) fn set_token(&mut self, token: Option<&str>) {
        self.ath.clear();
        if let Some(t) = token {
            let digest = ring::digest::digest(&ring::digest::SHA256, t.as_bytes());
            base64::url_safe_into(&mut self.ath, digest.as_ref());
        }
    }

    /// A proof for a request to the MCP server: `ath` for the current token, and the
    /// server's nonce when one is known.
    pub(crate) fn resource_proof(&mut self, htm: &str, htu: &str, iat: u64) -> Option<&[u8]> {
        let Self { claims, proof, key, ath, resource_nonce, .. } = self;
        let ath = (!ath.is_empty()).then_some(&ath[..]);
        build(key, claims, proof, htm, htu, iat, ath, resource_nonce.get())
    }

    /// A proof for a token request, with the authorization server's nonce if one is known.
    pub(crate) fn token_proof(
        &mut self,
        htu: &str,
        iat: u64,
        nonce: Option<&str>,
    ) -> Option<&[u8]> {
        let Self { claims, proof, key, .. } = self;
        build(key, claims, proof, "POST", htu, iat, None, nonce)
    }
}

/// Writes a proof into `proof` (cleared first), using `claims` as scratch. `None` when the
/// random source or the signer failed.
#[allow(clippy::too_many_arguments)]
fn build<'a>(
    key: &DpopKey,
    claims: &mut Vec<u8>,
    proof: &'a mut Vec<u8>,
    htm: &str,
    htu: &str,
    iat: u64,
    ath: Option<&[u8]>,
    nonce: Option<&str>,
) -> Option<&'a [u8]> {
    let mut jti = [0u8; 16];
    SystemRandom::new().fill(&mut jti).ok()?;
    claims.clear();
    claims.extend_from_slice(br#"{"jti":""#);
    base64::url_safe_into(claims, &jti);
    claims.extend_from_slice(br#"","htm":"#);
    serde_json::to_writer(&mut *claims, htm).ok()?;
    claims.extend_from_slice(br#","htu":"#);
    serde_json::to_writer(&mut *claims, htu).ok()?;
    write!(claims, r#","iat":{iat}"#).ok()?;
    if let Some(ath) = ath {
        claims.extend_from_slice(br#","ath":""#);
        claims.extend_from_slice(ath);
        claims.push(b'"');
    }
    if let Some(nonce) = nonce {
        claims.extend_from_slice(br#","nonce":"#);
        serde_json::to_writer(&mut *claims, nonce).ok()?;
    }
    claims.push(b'}');
    proof.clear();
    proof.extend_from_slice(&key.header);
    proof.push(b'.');
    base64::url_safe_into(proof, claims);
    let signed = proof.len();
    proof.push(b'.');
    // The claims are encoded: their buffer takes the signature, which is then appended.
    claims.clear();
    key.key.sign_into(&proof[..signed], claims)?;
    proof.extend_from_slice(claims);
    Some(&proof[..])
}

/// What DPoP reads from a server, over any bytes: as a `DPoP-Nonce` value and as a
/// `WWW-Authenticate` value. Never a panic; a nonce taken is `1*NQCHAR` within the cap, and
/// a challenge read names the scheme it came from. The fuzz target and its unit test share it.
#[cfg(any(fuzzing, test))]
pub(crate) fn check_server_input(data: &[u8]) {
    if let Ok(n) = parse_nonce(data) {
        assert!(!n.is_empty() && n.len() <= MAX_NONCE);
        assert!(n.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\'));
        // What is taken goes into a proof's JSON as it is.
        let quoted = serde_json::to_string(n).unwrap_or_default();
        assert_eq!(quoted.len(), n.len() + 2);
    }
    let mut kept = Nonce::default();
    let taken = kept.update(data);
    assert_eq!(taken, kept.get().is_some());
    if let Some(c) = crate::proto::challenge::parse(data) {
        if c.dpop {
            let lower = data.to_ascii_lowercase();
            assert!(lower.windows(4).any(|w| w == b"dpop"));
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use ring::signature::{UnparsedPublicKey, ECDSA_P256_SHA256_FIXED};
    use serde_json::Value;

    /// Splits a proof, checks its signature with the public key in its own header, and
    /// returns the header and claims.
    pub(crate) fn verify(proof: &str) -> (Value, Value) {
        let d = |s: &str| base64::decode(s.as_bytes()).expect("base64url");
        let (input, sig) = proof.rsplit_once('.').expect("three parts");
        let (header, claims) = input.split_once('.').expect("three parts");
        let header: Value = serde_json::from_slice(&d(header)).unwrap();
        let claims: Value = serde_json::from_slice(&d(claims)).unwrap();
        let jwk = &header["jwk"];
        let mut point = vec![4u8];
        point.extend(d(jwk["x"].as_str().unwrap()));
        point.extend(d(jwk["y"].as_str().unwrap()));
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(input.as_bytes(), &d(sig))
            .expect("the proof's signature verifies with the key in its header");
        (header, claims)
    }

    /// A fresh P-256 key as PKCS#8 PEM (for tests outside this module).
    pub(crate) fn es256_pem() -> String {
        super::super::crypto::tests::es256_pem().0
    }

    fn sha256_b64(data: &[u8]) -> String {
        b64(ring::digest::digest(&ring::digest::SHA256, data).as_ref())
    }

    #[test]
    fn proof_contents_and_signature() {
        let mut dpop = Dpop::new(DpopMode::Required, DpopKey::generate().unwrap());
        let proof = dpop.token_proof("https://as.example/token", 1_800_000_000, None).unwrap();
        let (header, claims) = verify(std::str::from_utf8(proof).unwrap());
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert_eq!(header["jwk"]["kty"], "EC");
        assert_eq!(header["jwk"]["crv"], "P-256");
        assert!(header["jwk"].get("d").is_none(), "no private part");
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://as.example/token");
        assert_eq!(claims["iat"], 1_800_000_000u64);
        assert_eq!(claims["jti"].as_str().unwrap().len(), 22);
        assert!(claims.get("ath").is_none() && claims.get("nonce").is_none());
        // RFC 7638 3.1's recipe over the header's own key gives the thumbprint.
        let jwk = &header["jwk"];
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            jwk["x"].as_str().unwrap(),
            jwk["y"].as_str().unwrap()
        );
        assert_eq!(dpop.thumbprint(), sha256_b64(canonical.as_bytes()));
        assert_eq!(dpop.thumbprint().len(), 43);
    }

    #[test]
    fn resource_proof_has_ath_nonce_and_fresh_jti() {
        let mut dpop = Dpop::new(DpopMode::IfSupported, DpopKey::generate().unwrap());
        dpop.set_token(Some("the-access-token"));
        assert!(dpop.resource_nonce.update(b" n-1_\x21~ "));
        let first = String::from_utf8(
            dpop.resource_proof("GET", "http://127.0.0.1:9/mcp", 5).unwrap().to_vec(),
        )
        .unwrap();
        let (_, claims) = verify(&first);
        assert_eq!(claims["ath"], sha256_b64(b"the-access-token"));
        assert_eq!(claims["nonce"], "n-1_!~");
        assert_eq!(claims["htm"], "GET");
        assert_eq!(claims["htu"], "http://127.0.0.1:9/mcp");
        let second = dpop.resource_proof("GET", "http://127.0.0.1:9/mcp", 5).unwrap();
        let (_, again) = verify(std::str::from_utf8(second).unwrap());
        assert_ne!(claims["jti"], again["jti"], "every proof has its own jti");
        // A new token, a new ath.
        dpop.set_token(Some("another"));
        let third = dpop.resource_proof("POST", "http://127.0.0.1:9/mcp", 5).unwrap();
        let (_, third) = verify(std::str::from_utf8(third).unwrap());
        assert_eq!(third["ath"], sha256_b64(b"another"));
    }

    #[test]
    fn proofs_reuse_their_buffers() {
        let mut dpop = Dpop::new(DpopMode::IfSupported, DpopKey::generate().unwrap());
        dpop.set_token(Some("t"));
        let at = dpop.resource_proof("POST", "http://h/mcp", 1).unwrap().as_ptr();
        for _ in 0..10 {
            let proof = dpop.resource_proof("POST", "http://h/mcp", 1).unwrap();
            assert_eq!(proof.as_ptr(), at, "the proof is written into the same buffer");
        }
    }

    #[test]
    fn host_keys() {
        let (pem, public) = super::super::crypto::tests::es256_pem();
        let key = DpopKey::from_pkcs8_pem(&pem).unwrap();
        let mut dpop = Dpop::new(DpopMode::Required, key);
        let proof = dpop.token_proof("https://as/t", 1, Some("n")).unwrap();
        let (header, claims) = verify(std::str::from_utf8(proof).unwrap());
        let mut point = vec![4u8];
        point.extend(base64::decode(header["jwk"]["x"].as_str().unwrap().as_bytes()).unwrap());
        point.extend(base64::decode(header["jwk"]["y"].as_str().unwrap().as_bytes()).unwrap());
        assert_eq!(point, public, "the header carries the host's public key");
        assert_eq!(claims["nonce"], "n");
        assert_eq!(DpopKey::from_pkcs8_pem("junk").err(), Some(KeyError::Pem));
        assert!(!format!("{dpop:?}").contains("BEGIN"));
    }

    #[test]
    fn nonces_and_modes() {
        let cases: &[(&[u8], Result<&str, NonceError>)] = &[
            (b"abc", Ok("abc")),
            (b"\t eyJ7S_zG.9-x~ ", Ok("eyJ7S_zG.9-x~")),
            (b"", Err(NonceError::Empty)),
            (b"   ", Err(NonceError::Empty)),
            (b"a\"b", Err(NonceError::Byte(b'"'))),
            (b"a\\b", Err(NonceError::Byte(b'\\'))),
            (b"a b", Err(NonceError::Byte(b' '))),
            (b"a\r\nb", Err(NonceError::Byte(b'\r'))),
            (b"caf\xc3\xa9", Err(NonceError::Byte(0xc3))),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_nonce(value), *expected, "{}", String::from_utf8_lossy(value));
        }
        assert_eq!(parse_nonce(&[b'a'; MAX_NONCE]).map(str::len), Ok(MAX_NONCE));
        assert_eq!(parse_nonce(&[b'a'; MAX_NONCE + 1]), Err(NonceError::TooLong));
        let mut kept = Nonce::default();
        assert!(kept.update(b"one"));
        assert!(!kept.update(b"bad nonce"));
        assert_eq!(kept.get(), Some("one"), "a bad value leaves the last good one");
        assert!(kept.update(b"two"));
        assert_eq!(kept.get(), Some("two"));
        assert_eq!(DpopMode::from_name("ifSupported"), Some(DpopMode::IfSupported));
        assert_eq!(DpopMode::from_name("required"), Some(DpopMode::Required));
        assert_eq!(DpopMode::from_name("on"), None);
    }

    /// The fuzz target's checks, on inputs a hostile server could send.
    #[test]
    fn server_input_fuzz_entry() {
        for input in [
            &b"DPoP error=\"use_dpop_nonce\", error_description=\"x\""[..],
            b"",
            b"\xff\xfe\"\\",
            b"Bearer realm=x, DPoP algs=\"ES256\" error=use_dpop_nonce",
            b"nonce-value",
            &[b'n'; 4096],
        ] {
            check_server_input(input);
        }
    }
}
