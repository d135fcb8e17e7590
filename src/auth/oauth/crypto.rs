//! The flow's cryptography, all from `ring` (already in the tree through rustls): SHA-256 for
//! PKCE, the system random source for verifiers, `state` and JWT ids, and JWS signatures for
//! `private_key_jwt` client authentication (RFC 7523 2.2) and DPoP proofs (RFC 9449).

use std::fmt;

use ring::rand::{SecureRandom, SystemRandom};
use ring::signature::{self, EcdsaKeyPair, KeyPair as _, RsaKeyPair};

use super::encode::{base64_decode, base64url};

/// `n` random bytes as base64url: 32 bytes give a 43-character PKCE verifier (RFC 7636 4.1).
pub(crate) fn random_token(n: usize) -> Option<String> {
    let mut buf = vec![0u8; n];
    SystemRandom::new().fill(&mut buf).ok()?;
    Some(base64url(&buf))
}

/// The S256 code challenge of a verifier (RFC 7636 4.2).
pub(crate) fn s256(verifier: &str) -> String {
    base64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref())
}

/// A JWS signature algorithm for `private_key_jwt`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum JwtAlgorithm {
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
}

impl JwtAlgorithm {
    /// Reads a JWS `alg` name (`ES256`, `RS256`).
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "ES256" => Some(Self::Es256),
            "RS256" => Some(Self::Rs256),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Es256 => "ES256",
            Self::Rs256 => "RS256",
        }
    }
}

enum KeyPair {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

/// A private key for `private_key_jwt`, parsed once from PKCS#8 PEM.
pub struct SigningKey {
    alg: JwtAlgorithm,
    key: KeyPair,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey({}, <redacted>)", self.alg.name())
    }
}

/// Why a private key was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// Not a `-----BEGIN PRIVATE KEY-----` PEM block with base64 inside.
    Pem,
    /// The PKCS#8 document is not a key of the named algorithm (or, for DPoP, not ES256).
    Key,
    /// No key could be generated: the system random source failed.
    Generate,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Pem => "the private key is not a PKCS#8 PEM block",
            Self::Key => "the private key does not match the signing algorithm",
            Self::Generate => "no key could be generated (the random source failed)",
        })
    }
}

impl std::error::Error for KeyError {}

impl SigningKey {
    /// Parses a PKCS#8 `PRIVATE KEY` PEM block for `alg`.
    pub fn from_pkcs8_pem(pem: &str, alg: JwtAlgorithm) -> Result<Self, KeyError> {
        let body = pem
            .split("-----BEGIN PRIVATE KEY-----")
            .nth(1)
            .and_then(|rest| rest.split("-----END PRIVATE KEY-----").next())
            .ok_or(KeyError::Pem)?;
        let der = base64_decode(body).ok_or(KeyError::Pem)?;
        let key = match alg {
            JwtAlgorithm::Es256 => KeyPair::Ec(
                EcdsaKeyPair::from_pkcs8(
                    &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
                    &der,
                    &SystemRandom::new(),
                )
                .map_err(|_| KeyError::Key)?,
            ),
            JwtAlgorithm::Rs256 => {
                KeyPair::Rsa(RsaKeyPair::from_pkcs8(&der).map_err(|_| KeyError::Key)?)
            }
        };
        Ok(Self { alg, key })
    }

    /// A fresh ES256 key (for DPoP, when the host supplies none).
    pub(crate) fn generate_es256() -> Result<Self, KeyError> {
        let alg = &signature::ECDSA_P256_SHA256_FIXED_SIGNING;
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(alg, &rng).map_err(|_| KeyError::Generate)?;
        let key =
            EcdsaKeyPair::from_pkcs8(alg, doc.as_ref(), &rng).map_err(|_| KeyError::Generate)?;
        Ok(Self { alg: JwtAlgorithm::Es256, key: KeyPair::Ec(key) })
    }

    /// The algorithm.
    pub(crate) fn alg(&self) -> JwtAlgorithm {
        self.alg
    }

    /// The public point of an ES256 key, uncompressed (`04 || x || y`, 65 bytes); `None` for
    /// an RSA key.
    pub(crate) fn ec_public_point(&self) -> Option<&[u8]> {
        match &self.key {
            KeyPair::Ec(k) => Some(k.public_key().as_ref()),
            KeyPair::Rsa(_) => None,
        }
    }

    /// Signs `input` (a JWS signing input) and appends the signature, base64url, to `out`.
    /// An ES256 signature is made on the stack: with room in `out`, nothing is allocated.
    pub(crate) fn sign_into(&self, input: &[u8], out: &mut Vec<u8>) -> Option<()> {
        let rng = SystemRandom::new();
        match &self.key {
            KeyPair::Ec(k) => {
                let sig = k.sign(&rng, input).ok()?;
                crate::codec::base64::url_safe_into(out, sig.as_ref());
            }
            KeyPair::Rsa(k) => {
                let mut sig = vec![0u8; k.public().modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, input, &mut sig).ok()?;
                crate::codec::base64::url_safe_into(out, &sig);
            }
        }
        Some(())
    }

    /// A compact JWS over `claims` (a JSON object), or `None` if signing failed.
    pub(crate) fn sign_jwt(&self, claims: &serde_json::Value) -> Option<String> {
        let header = serde_json::json!({"alg": self.alg.name(), "typ": "JWT"});
        let mut input = base64url(header.to_string().as_bytes()).into_bytes();
        input.push(b'.');
        crate::codec::base64::url_safe_into(&mut input, claims.to_string().as_bytes());
        let signed = input.len();
        input.push(b'.');
        let mut sig = Vec::new();
        self.sign_into(&input[..signed], &mut sig)?;
        input.extend_from_slice(&sig);
        String::from_utf8(input).ok()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh P-256 key as PKCS#8 PEM, and its public key for verifying.
    pub(crate) fn es256_pem() -> (String, Vec<u8>) {
        let rng = SystemRandom::new();
        let doc = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            doc.as_ref(),
            &rng,
        )
        .unwrap();
        let pem = format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n",
            super::super::encode::base64(doc.as_ref())
        );
        (pem, pair.public_key().as_ref().to_vec())
    }

    #[test]
    fn pkce_s256_vector() {
        // SHA-256("abc") is FIPS 180-2's first vector, ba7816bf...15ad, here in base64url.
        assert_eq!(s256("abc"), "ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0");
        let v = random_token(32).unwrap();
        assert_eq!(v.len(), 43);
        assert_ne!(v, random_token(32).unwrap());
    }

    #[test]
    fn es256_jwt_verifies() {
        let (pem, public) = es256_pem();
        let key = SigningKey::from_pkcs8_pem(&pem, JwtAlgorithm::Es256).unwrap();
        assert!(!format!("{key:?}").contains("BEGIN"));
        let jwt = key.sign_jwt(&serde_json::json!({"iss": "c"})).unwrap();
        let mut parts = jwt.rsplitn(2, '.');
        let sig = base64_decode(parts.next().unwrap()).unwrap();
        let input = parts.next().unwrap();
        signature::UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, &public)
            .verify(input.as_bytes(), &sig)
            .unwrap();
        let header = base64_decode(input.split('.').next().unwrap()).unwrap();
        assert_eq!(header, br#"{"alg":"ES256","typ":"JWT"}"#);
        assert_eq!(
            SigningKey::from_pkcs8_pem(&pem, JwtAlgorithm::Rs256).err(),
            Some(KeyError::Key)
        );
        assert_eq!(
            SigningKey::from_pkcs8_pem("junk", JwtAlgorithm::Es256).err(),
            Some(KeyError::Pem)
        );
    }
}
