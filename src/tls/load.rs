//! Loading a node's certificate set and checking it whole, free of network I/O: the node
//! certificate (and the intermediates after it), its private key, the trusted roots and the
//! reserved common name. A set is used only once every check passed; the first failure is the
//! error, naming the file and what is wrong with it.
//!
//! Checks, in order: the certificate file holds PEM `CERTIFICATE` blocks (or one DER
//! certificate); the key file holds exactly one private key (`PRIVATE KEY`, `RSA PRIVATE KEY`,
//! `EC PRIVATE KEY`, or `ENCRYPTED PRIVATE KEY` opened with `CertificatePrivateKeyPassword`)
//! that signs for the certificate's public key — or, with no key file configured, the
//! certificate file is a PKCS #12 bundle (opened with `CertificatePassword`) holding exactly one
//! private key with its certificate first and intermediates after it; the node certificate's
//! common name matches the reserved name (when one is configured; otherwise the certificate's
//! own common name becomes it); no intermediate is self-signed; every file of the trusted roots
//! directory with a certificate extension (`.crt .cert .cer .pem .der`, top level only) holds
//! only self-signed certificates, and at least one root is loaded; the chain from the node
//! certificate through the intermediates reaches a root and every certificate on it is valid now.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::pki_types::pem::{PemObject, SectionKind};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, UnixTime};
use rustls::RootCertStore;
use sha2::Digest;

use crate::env::Disk;

/// Extensions of the files the trusted roots directory contributes.
pub const ROOT_EXTENSIONS: &[&str] = &["crt", "cert", "cer", "pem", "der"];
/// Largest certificate, key or root file read, bytes.
pub const MAX_FILE_BYTES: u64 = 1 << 20;
/// Most files of the trusted roots directory read.
pub const MAX_ROOT_FILES: usize = 4096;

/// Where a node's certificates are, as configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CertPaths {
    /// `CertificateFile`: the node certificate, then any intermediates (PEM), or one DER certificate.
    pub certificate: PathBuf,
    /// `CertificatePrivateKeyFile`.
    pub private_key: PathBuf,
    /// `TrustedRootCertificatesPath`: a directory.
    pub trusted_roots: PathBuf,
    /// `CertificateReservedNodeCommonName` ("": the node certificate's own common name).
    pub reserved_cn: String,
    /// `CertificatePrivateKeyPassword`: opens an `ENCRYPTED PRIVATE KEY`.
    pub key_password: Password,
    /// `CertificatePassword`: opens a PKCS #12 certificate file.
    pub bundle_password: Password,
}

/// A password of the configuration: never printed (its `Debug` shows whether one is set).
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Password(pub String);

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() { "(none)" } else { "(set)" })
    }
}

/// Why a certificate set was refused.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    /// A file or directory could not be read.
    #[error("cannot read {what} {path}: {reason}")]
    Read {
        /// Which file.
        what: &'static str,
        /// Path.
        path: PathBuf,
        /// Cause.
        reason: String,
    },
    /// A file is not PEM (or DER) of the kind expected.
    #[error("{what} {path} is malformed: {reason}")]
    Malformed {
        /// Which file.
        what: &'static str,
        /// Path.
        path: PathBuf,
        /// Cause.
        reason: String,
    },
    /// The private key file has no usable key, or more than one.
    #[error("private key file {path}: {reason}")]
    Key {
        /// Path.
        path: PathBuf,
        /// Cause.
        reason: String,
    },
    /// The key is not the certificate's.
    #[error("the private key {key} does not match the certificate {certificate}")]
    KeyMismatch {
        /// Key file.
        key: PathBuf,
        /// Certificate file.
        certificate: PathBuf,
    },
    /// The node certificate's common name does not carry the reserved name.
    #[error("certificate CN {cn:?} does not match the reserved node common name {reserved:?}")]
    CommonName {
        /// The certificate's CN.
        cn: String,
        /// `CertificateReservedNodeCommonName`.
        reserved: String,
    },
    /// The trusted roots directory gave no root, or a file that is not a root.
    #[error("trusted root certificates {path}: {reason}")]
    Roots {
        /// Path.
        path: PathBuf,
        /// Cause.
        reason: String,
    },
    /// The chain does not verify (untrusted issuer, a missing intermediate, expired or not yet valid).
    #[error("the certificate {path} does not verify against the trusted roots: {reason}")]
    Chain {
        /// Certificate file.
        path: PathBuf,
        /// Cause.
        reason: String,
    },
}

/// A checked certificate set.
#[derive(Clone, Debug)]
pub struct CertSet {
    /// The node certificate, then its intermediates.
    pub chain: Vec<CertificateDer<'static>>,
    /// The node's private key.
    pub key: Arc<PrivateKeyDer<'static>>,
    /// The trusted roots.
    pub roots: Arc<RootCertStore>,
    /// The reserved node common name in force (configured, or the certificate's own).
    pub reserved_cn: String,
    /// Whether the reserved name is the certificate's own (none configured).
    pub reserved_auto: bool,
    /// The node certificate's facts.
    pub about: CertFacts,
}

/// What the log and `/admin/reloadconfig` say of a node certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertFacts {
    /// Subject common name ("" when none).
    pub cn: String,
    /// SHA-256 of the DER certificate, upper-case hex.
    pub thumbprint: String,
    /// End of validity, seconds since the Unix epoch.
    pub not_after: i64,
}

/// Facts of one DER certificate: common name, subject and issuer (raw), end of validity.
pub struct Parsed {
    /// Subject common name ("" when none).
    pub cn: String,
    /// Whether subject and issuer are the same name.
    pub self_issued: bool,
    /// End of validity, seconds since the epoch.
    pub not_after: i64,
}

/// Parses the facts the checks need out of a DER certificate.
pub fn parse(der: &[u8]) -> Result<Parsed, String> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der).map_err(|e| e.to_string())?;
    if !rest.is_empty() {
        return Err(format!("{} bytes follow the certificate", rest.len()));
    }
    let cn = cert.subject().iter_common_name().next().and_then(|a| a.as_str().ok()).unwrap_or("").to_owned();
    Ok(Parsed {
        cn,
        self_issued: cert.tbs_certificate.subject.as_raw() == cert.tbs_certificate.issuer.as_raw(),
        not_after: cert.validity().not_after.timestamp(),
    })
}

/// Upper-case hex SHA-256 of `der`.
pub fn thumbprint(der: &[u8]) -> String {
    sha2::Sha256::digest(der).iter().map(|b| format!("{b:02X}")).collect()
}

fn read(files: &dyn Disk, what: &'static str, path: &Path) -> Result<Vec<u8>, CertError> {
    let err = |reason: String| CertError::Read { what, path: path.to_owned(), reason };
    if path.as_os_str().is_empty() {
        return Err(err("no path is configured".into()));
    }
    let f = files.open(path, crate::env::OpenMode::Read).map_err(|e| err(e.to_string()))?;
    let len = f.len().map_err(|e| err(e.to_string()))?;
    if len > MAX_FILE_BYTES {
        return Err(err(format!("the file is larger than {MAX_FILE_BYTES} bytes")));
    }
    f.read_vec_at(len as usize, 0).map_err(|e| err(e.to_string()))
}

/// The certificates of a file: every PEM `CERTIFICATE` block, or the file as one DER certificate
/// when it holds no PEM.
fn certificates(
    what: &'static str,
    path: &Path,
    bytes: &[u8],
) -> Result<Vec<CertificateDer<'static>>, CertError> {
    let malformed = |reason: String| CertError::Malformed { what, path: path.to_owned(), reason };
    if !bytes.windows(11).any(|w| w == b"-----BEGIN ") {
        if bytes.first() == Some(&0x30) {
            parse(bytes).map_err(|e| malformed(format!("not a DER certificate: {e}")))?;
            return Ok(vec![CertificateDer::from(bytes.to_vec())]);
        }
        return Err(malformed("neither PEM nor a DER certificate".into()));
    }
    let mut out = Vec::new();
    for item in <(SectionKind, Vec<u8>)>::pem_slice_iter(bytes) {
        let (kind, der) = item.map_err(|e| malformed(format!("bad PEM: {e}")))?;
        if kind == SectionKind::Certificate {
            parse(&der)
                .map_err(|e| malformed(format!("certificate {} does not parse: {e}", out.len() + 1)))?;
            out.push(CertificateDer::from(der));
        }
    }
    if out.is_empty() {
        return Err(malformed("no CERTIFICATE block".into()));
    }
    Ok(out)
}

fn private_key(path: &Path, bytes: &[u8], password: &Password) -> Result<PrivateKeyDer<'static>, CertError> {
    let err = |reason: String| CertError::Key { path: path.to_owned(), reason };
    let mut keys = Vec::new();
    for block in encrypted_blocks(bytes) {
        let (_, der) = pkcs8::der::pem::decode_vec(block).map_err(|e| err(format!("bad PEM: {e}")))?;
        keys.push(PrivateKeyDer::Pkcs8(decrypt(&der, password).map_err(err)?.into()));
    }
    for item in <(SectionKind, Vec<u8>)>::pem_slice_iter(bytes) {
        let (kind, der) = item.map_err(|e| err(format!("bad PEM: {e}")))?;
        let key = match kind {
            SectionKind::PrivateKey => PrivateKeyDer::Pkcs8(der.into()),
            SectionKind::RsaPrivateKey => PrivateKeyDer::Pkcs1(der.into()),
            SectionKind::EcPrivateKey => PrivateKeyDer::Sec1(der.into()),
            _ => continue,
        };
        keys.push(key);
    }
    match keys.len() {
        0 => Err(err(
            "no private key (expected a PEM PRIVATE KEY, RSA PRIVATE KEY, EC PRIVATE KEY or ENCRYPTED PRIVATE KEY block)".into()
        )),
        1 => Ok(keys.remove(0)),
        n => Err(err(format!("{n} private keys; exactly one is expected"))),
    }
}

/// The `ENCRYPTED PRIVATE KEY` blocks of a PEM file, each from its BEGIN line to its END line.
fn encrypted_blocks(bytes: &[u8]) -> Vec<&[u8]> {
    const BEGIN: &[u8] = b"-----BEGIN ENCRYPTED PRIVATE KEY-----";
    const END: &[u8] = b"-----END ENCRYPTED PRIVATE KEY-----";
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(b) = find(&bytes[at..], BEGIN) {
        let start = at + b;
        let Some(e) = find(&bytes[start..], END) else { break };
        let end = start + e + END.len();
        out.push(&bytes[start..end]);
        at = end;
    }
    out
}

/// Opens an encrypted PKCS #8 key (PBES2: PBKDF2 or scrypt with AES-CBC) with `password`.
fn decrypt(der: &[u8], password: &Password) -> Result<Vec<u8>, String> {
    if password.0.is_empty() {
        return Err("the private key is encrypted: set CertificatePrivateKeyPassword".into());
    }
    let info = pkcs8::EncryptedPrivateKeyInfo::try_from(der)
        .map_err(|e| format!("the encrypted private key does not parse: {e}"))?;
    let doc = info.decrypt(password.0.as_bytes()).map_err(|e| {
        format!("cannot decrypt the private key ({e}): a wrong CertificatePrivateKeyPassword, or a scheme other than PBES2 with PBKDF2 or scrypt and AES-CBC")
    })?;
    Ok(doc.as_bytes().to_vec())
}

/// The node certificate, its intermediates and its key out of a PKCS #12 bundle.
fn bundle(
    path: &Path,
    bytes: &[u8],
    password: &Password,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), CertError> {
    let err = |reason: String| CertError::Malformed {
        what: "PKCS #12 certificate file",
        path: path.to_owned(),
        reason,
    };
    let store = p12_keystore::KeyStore::from_pkcs12(bytes, &password.0).map_err(|e| {
        err(format!("cannot open it ({e}): not a PKCS #12 bundle, or a wrong CertificatePassword; with a PEM or DER certificate, set CertificatePrivateKeyFile too"))
    })?;
    let mut chains = store.entries().filter_map(|(_, e)| match e {
        p12_keystore::KeyStoreEntry::PrivateKeyChain(c) => Some(c),
        _ => None,
    });
    let Some(chain) = chains.next() else { return Err(err("no private key in the bundle".into())) };
    if chains.next().is_some() {
        return Err(err("multiple private keys in the bundle; exactly one is expected".into()));
    }
    // A bundle usually ends with its root: trust comes from the trusted roots directory only,
    // so self-signed certificates after the node's are left out.
    let certs: Vec<CertificateDer<'static>> = chain
        .chain()
        .iter()
        .enumerate()
        .filter(|(i, c)| *i == 0 || !parse(c.as_der()).is_ok_and(|p| p.self_issued))
        .map(|(_, c)| CertificateDer::from(c.as_der().to_vec()))
        .collect();
    if certs.is_empty() {
        return Err(err("the bundle's private key has no certificate".into()));
    }
    Ok((certs, PrivateKeyDer::Pkcs8(chain.key().to_vec().into())))
}

/// The trusted roots: every top-level file of `dir` with a certificate extension, each holding
/// only self-signed certificates.
fn roots(files: &dyn Disk, dir: &Path) -> Result<(RootCertStore, Vec<CertificateDer<'static>>), CertError> {
    let err = |reason: String| CertError::Roots { path: dir.to_owned(), reason };
    if dir.as_os_str().is_empty() {
        return Err(err("no path is configured".into()));
    }
    let names = files.list(dir).map_err(|e| err(format!("cannot list the directory: {e}")))?;
    let mut store = RootCertStore::empty();
    let mut ders = Vec::new();
    let mut read_files = 0usize;
    for name in names {
        let ext = Path::new(&name).extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase);
        if !ext.is_some_and(|e| ROOT_EXTENSIONS.contains(&e.as_str())) {
            continue;
        }
        read_files += 1;
        if read_files > MAX_ROOT_FILES {
            return Err(err(format!("more than {MAX_ROOT_FILES} certificate files")));
        }
        let path = dir.join(&name);
        let bytes = read(files, "trusted root file", &path)?;
        for der in certificates("trusted root file", &path, &bytes)? {
            let parsed = parse(&der).map_err(|e| err(format!("{name}: {e}")))?;
            if !parsed.self_issued {
                return Err(err(format!(
                    "{name}: certificate {:?} is not self-signed, so it is not a root",
                    parsed.cn
                )));
            }
            store.add(der.clone()).map_err(|e| err(format!("{name}: {e}")))?;
            ders.push(der);
        }
    }
    if store.is_empty() {
        return Err(err(format!(
            "no root certificate was loaded (files ending {} are read)",
            ROOT_EXTENSIONS.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(" ")
        )));
    }
    Ok((store, ders))
}

/// Loads the set `paths` names through `files` and checks it at `now`.
pub fn load(files: &dyn Disk, paths: &CertPaths, now: UnixTime) -> Result<CertSet, CertError> {
    let cert_bytes = read(files, "certificate file", &paths.certificate)?;
    let (chain, key) = if paths.private_key.as_os_str().is_empty() {
        bundle(&paths.certificate, &cert_bytes, &paths.bundle_password)?
    } else {
        let chain = certificates("certificate file", &paths.certificate, &cert_bytes)?;
        let key_bytes = read(files, "private key file", &paths.private_key)?;
        (chain, private_key(&paths.private_key, &key_bytes, &paths.key_password)?)
    };
    let provider = super::provider();
    let signing = provider.key_provider.load_private_key(key.clone_key()).map_err(|e| CertError::Key {
        path: paths.private_key.clone(),
        reason: format!("not a usable key: {e}"),
    })?;
    let certified = rustls::sign::CertifiedKey::new(chain.clone(), signing);
    match certified.keys_match() {
        Ok(()) => {}
        Err(rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch)) => {
            return Err(CertError::KeyMismatch {
                key: paths.private_key.clone(),
                certificate: paths.certificate.clone(),
            })
        }
        Err(e) => {
            return Err(CertError::Malformed {
                what: "certificate file",
                path: paths.certificate.clone(),
                reason: e.to_string(),
            })
        }
    }
    let node = parse(&chain[0]).map_err(|reason| CertError::Malformed {
        what: "certificate file",
        path: paths.certificate.clone(),
        reason,
    })?;
    let (reserved_cn, reserved_auto) = if paths.reserved_cn.is_empty() {
        (node.cn.clone(), true)
    } else {
        if !super::names::cn_matches_reserved(&node.cn, &paths.reserved_cn) {
            return Err(CertError::CommonName { cn: node.cn, reserved: paths.reserved_cn.clone() });
        }
        (paths.reserved_cn.clone(), false)
    };
    if reserved_cn.is_empty() {
        return Err(CertError::CommonName { cn: String::new(), reserved: paths.reserved_cn.clone() });
    }
    for (i, der) in chain.iter().enumerate().skip(1) {
        let p = parse(der).map_err(|reason| CertError::Malformed {
            what: "certificate file",
            path: paths.certificate.clone(),
            reason,
        })?;
        if p.self_issued {
            return Err(CertError::Chain {
                path: paths.certificate.clone(),
                reason: format!("certificate {} of the file ({:?}) is self-signed; intermediates must not be, and roots belong in the trusted roots directory", i + 1, p.cn),
            });
        }
    }
    let (roots, _) = roots(files, &paths.trusted_roots)?;
    let parsed =
        rustls::server::ParsedCertificate::try_from(&chain[0]).map_err(|e| CertError::Malformed {
            what: "certificate file",
            path: paths.certificate.clone(),
            reason: e.to_string(),
        })?;
    rustls::client::verify_server_cert_signed_by_trust_anchor(
        &parsed,
        &roots,
        &chain[1..],
        now,
        provider.signature_verification_algorithms.all,
    )
    .map_err(|e| CertError::Chain { path: paths.certificate.clone(), reason: chain_reason(&e) })?;
    let about = CertFacts { cn: node.cn, thumbprint: thumbprint(&chain[0]), not_after: node.not_after };
    Ok(CertSet { chain, key: Arc::new(key), roots: Arc::new(roots), reserved_cn, reserved_auto, about })
}

/// A verification error in operators' words ("partial chain" for an issuer not among the roots).
pub fn chain_reason(e: &rustls::Error) -> String {
    match e {
        rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer) => {
            "partial chain: no trusted root issued it (or an intermediate is missing)".into()
        }
        other => other.to_string(),
    }
}
