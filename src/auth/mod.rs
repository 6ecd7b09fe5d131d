//! Users, credentials and stream access control.
//!
//! Users are events in system streams written through the [`Store`], so they are replicated and
//! backed up like any other data; the streams and event types are those of EventStoreDB v5:
//! - `$user-<login>` holds `$UserCreated`/`$UserUpdated` events; the latest one is the user;
//! - `$users` indexes logins with `$User` events (data: the login);
//! - `$users-password-notifications` gets a `$PasswordChanged` event on every password change.
//!
//! Passwords are stored as PBKDF2-HMAC-SHA256 hashes ([`password`]) with a random salt from the
//! environment. Verifying one costs tens of milliseconds by design, so verified `Authorization`
//! headers are cached briefly, keyed by a SHA-256 of the header (never the password itself); every
//! user change clears the cache, so a disabled user or an old password is refused at once. The
//! cache follows the published records itself (a follow cursor of the store, [`Auth::catch_up`]
//! before every lookup), so a change that arrives by any path — this API, a stream write,
//! replication, a restore — counts, and one acknowledged before a request is seen by it.
//!
//! Stream access ([`acl`]) combines a stream's `$acl` metadata, the defaults of the latest
//! `$settings` event (cached by its event number) and built-in fallbacks.

pub mod acl;
pub mod password;
mod users;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use sha2::Digest;

use crate::env::Env;
use crate::store::{Follow, ReadError, StorageError, Store};

pub use acl::{Access, Operation, Settings};
pub use users::{UserError, UserRecord, USERS_STREAM};

/// PBKDF2 iterations for new hashes in production.
pub const DEFAULT_PASSWORD_ITERATIONS: u32 = 100_000;
/// How long a verified (or refused) `Authorization` header is remembered.
pub const CREDENTIAL_TTL: Duration = Duration::from_secs(60);
/// Cached headers at most; the cache is emptied when full.
const CREDENTIAL_CACHE_MAX: usize = 10_000;

/// Whether an event of `stream` changes users: `$user-<login>`, `$users`,
/// `$users-password-notifications`, or their metastreams. (`$settings` needs no watching: its
/// cache is keyed by the stream's last event number, which every publish keeps current.)
fn changes_users(stream: &str) -> bool {
    stream.strip_prefix("$$").unwrap_or(stream).starts_with("$user")
}

/// The users' settings (a section of the node's configuration).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuthConfig {
    /// PBKDF2 iterations for new password hashes.
    pub password_iterations: u32,
}

/// An authenticated caller. Its roles are its groups plus its own login.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Principal {
    /// Login name.
    pub login: String,
    /// Groups.
    pub groups: Vec<String>,
}

impl Principal {
    /// Every role the caller holds.
    pub fn roles(&self) -> impl Iterator<Item = &str> {
        self.groups.iter().map(String::as_str).chain(std::iter::once(self.login.as_str()))
    }
    /// Member of `$admins`.
    pub fn is_admin(&self) -> bool {
        self.groups.iter().any(|g| g == acl::ROLE_ADMINS)
    }
    /// Member of `$ops` or `$admins`.
    pub fn is_ops(&self) -> bool {
        self.is_admin() || self.groups.iter().any(|g| g == acl::ROLE_OPS)
    }
}

/// Why credentials were not accepted.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AuthFailure {
    /// Wrong, malformed or disabled credentials.
    #[error("unauthorized")]
    Unauthorized,
    /// The user store could not be read.
    #[error(transparent)]
    Storage(#[from] StorageError),
}

struct CredCache {
    generation: u64,
    entries: HashMap<[u8; 32], (Result<Principal, AuthFailure>, Duration)>,
}

/// Users, credentials and access checks of one node.
pub struct Auth {
    env: Env,
    store: Arc<Store>,
    iterations: u32,
    creds: Mutex<CredCache>,
    settings: Mutex<Option<(i64, Arc<Settings>)>>,
    /// The credential cache's follow cursor ([`Auth::catch_up`]).
    users: Mutex<Follow>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Splits an `Authorization: Basic …` value into login and password.
pub fn parse_basic(header: &str) -> Option<(String, String)> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let raw = base64::engine::general_purpose::STANDARD.decode(rest.trim()).ok()?;
    let text = String::from_utf8(raw).ok()?;
    let (login, password) = text.split_once(':')?;
    Some((login.to_owned(), password.to_owned()))
}

impl Auth {
    /// A user store over `store`; new password hashes use `iterations`.
    pub fn new(env: Env, store: Arc<Store>, iterations: u32) -> Auth {
        let users = store.follow_new();
        Auth {
            env,
            store,
            iterations: iterations.max(1),
            creds: Mutex::new(CredCache { generation: 0, entries: HashMap::new() }),
            settings: Mutex::new(None),
            users: Mutex::new(users),
        }
    }

    fn key(header: &str) -> [u8; 32] {
        sha2::Sha256::digest(header.as_bytes()).into()
    }

    /// The cached verdict on an `Authorization` header, if a fresh one exists (never blocks).
    pub fn cached(&self, header: &str) -> Option<Result<Principal, AuthFailure>> {
        self.catch_up();
        let now = self.env.clock.monotonic();
        let cache = lock(&self.creds);
        match cache.entries.get(&Self::key(header)) {
            Some((verdict, expires)) if *expires > now => Some(verdict.clone()),
            _ => None,
        }
    }

    /// Verifies an `Authorization` header against the user store (blocking: reads the store and
    /// derives the hash) and caches the verdict.
    pub fn authenticate(&self, header: &str) -> Result<Principal, AuthFailure> {
        let generation = lock(&self.creds).generation;
        let verdict = self.verify(header);
        if matches!(verdict, Err(AuthFailure::Storage(_))) {
            return verdict;
        }
        let expires = self.env.clock.monotonic() + CREDENTIAL_TTL;
        let mut cache = lock(&self.creds);
        if cache.generation == generation {
            if cache.entries.len() >= CREDENTIAL_CACHE_MAX {
                cache.entries.clear();
            }
            cache.entries.insert(Self::key(header), (verdict.clone(), expires));
        }
        verdict
    }

    fn verify(&self, header: &str) -> Result<Principal, AuthFailure> {
        let (login, password) = parse_basic(header).ok_or(AuthFailure::Unauthorized)?;
        let user = self.user(&login)?.ok_or(AuthFailure::Unauthorized)?;
        if user.disabled || !user.password_matches(&password) {
            return Err(AuthFailure::Unauthorized);
        }
        Ok(Principal { login: user.login, groups: user.groups })
    }

    /// Forgets every cached verdict.
    fn invalidate(&self) {
        let mut cache = lock(&self.creds);
        cache.generation += 1;
        cache.entries.clear();
    }

    /// Catches the credential cache up on what has been published: clears it if a user stream
    /// was written since the last catch-up, whoever wrote it (this API, a stream write to
    /// `$user-…`, replication, a restore). Reads nothing from the disk: a cursor that fell behind
    /// the store's kept summaries skips to the end and clears the cache instead.
    pub fn catch_up(&self) {
        let mut cursor = lock(&self.users);
        if !cursor.has_more() {
            return;
        }
        let changed = match cursor.streams_kept() {
            Some(streams) => streams.iter().any(|s| changes_users(s)),
            None => {
                cursor.skip_to_committed();
                true
            }
        };
        drop(cursor);
        if changed {
            self.invalidate();
        }
    }

    /// The defaults of the latest `$settings` event (blocking; cached by its event number).
    pub fn settings(&self) -> Result<Arc<Settings>, StorageError> {
        let last = self.store.stream_state("$settings")?.last;
        if let Some((n, s)) = lock(&self.settings).as_ref() {
            if *n == last {
                return Ok(s.clone());
            }
        }
        let now = self.env.clock.wall_micros();
        let parsed = match self.store.read_event("$settings", -1, false, now) {
            Ok(Some(e)) => Settings::parse(&e.event.data),
            Ok(None)
            | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => {
                Settings::default()
            }
            Err(ReadError::Storage(e)) => return Err(e),
        };
        let parsed = Arc::new(parsed);
        *lock(&self.settings) = Some((last, parsed.clone()));
        Ok(parsed)
    }

    /// Checks `op` on `stream` for `principal` (blocking: reads metadata and settings).
    pub fn check(
        &self,
        principal: Option<&Principal>,
        stream: &str,
        op: Operation,
    ) -> Result<Access, StorageError> {
        let Some((base, op)) = acl::governing(stream, op) else {
            return Ok(Access { allowed: false, public: false });
        };
        let meta = self.store.metadata(base)?;
        let settings = self.settings()?;
        Ok(acl::decide(principal, base, op, &meta, &settings))
    }

    /// [`Auth::check`] from cached state only: `None` when the stream's metadata or the settings
    /// are not cached (the caller then runs [`Auth::check`] where it may block).
    pub fn check_cached(&self, principal: Option<&Principal>, stream: &str, op: Operation) -> Option<Access> {
        let Some((base, op)) = acl::governing(stream, op) else {
            return Some(Access { allowed: false, public: false });
        };
        let last = self.store.with_cached_state("$settings", |s| s.last)?;
        let settings = match lock(&self.settings).as_ref() {
            Some((n, s)) if *n == last => s.clone(),
            _ => return None,
        };
        self.store.with_cached_state(base, |s| acl::decide(principal, base, op, &s.meta, &settings))
    }

    /// New password material: `(salt, hash, iterations)`.
    fn hash_password(&self, password: &str) -> (Vec<u8>, Vec<u8>, u32) {
        let mut salt = vec![0u8; password::SALT_BYTES];
        self.env.fill_random(&mut salt);
        let hash = password::derive(password, &salt, self.iterations);
        (salt, hash.to_vec(), self.iterations)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a future on this thread (the in-memory store's writes complete without a runtime).
    fn block_on<F: std::future::Future>(f: F) -> F::Output {
        let mut f = std::pin::pin!(f);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        loop {
            if let std::task::Poll::Ready(r) = f.as_mut().poll(&mut cx) {
                return r;
            }
            std::thread::yield_now();
        }
    }

    #[test]
    fn verdicts_are_cached_until_users_change() {
        let (env, _disk, clock) = crate::env::mem::env(7);
        let mut cfg = crate::store::StoreConfig::new("/db");
        cfg.chunk_size = 1 << 20;
        cfg.existence_filter_bytes = 4096;
        let store = Store::open(&env, cfg).unwrap();
        let auth = Auth::new(env, store, 4);
        auth.ensure_default_users_blocking().unwrap();
        let admin = "Basic YWRtaW46Y2hhbmdlaXQ=";
        assert_eq!(auth.cached(admin), None);
        let p = auth.authenticate(admin).unwrap();
        assert!(p.is_admin() && p.is_ops());
        assert_eq!(auth.cached(admin), Some(Ok(p)));
        assert_eq!(auth.authenticate("Basic YWRtaW46eA=="), Err(AuthFailure::Unauthorized));
        assert_eq!(auth.cached("Basic YWRtaW46eA=="), Some(Err(AuthFailure::Unauthorized)));
        // Any user change forgets every verdict; the cache also expires on its own.
        block_on(auth.set_disabled("ops", true)).unwrap();
        assert_eq!(auth.cached(admin), None);
        assert_eq!(auth.authenticate("Basic b3BzOmNoYW5nZWl0"), Err(AuthFailure::Unauthorized));
        auth.authenticate(admin).unwrap();
        clock.advance(CREDENTIAL_TTL);
        assert_eq!(auth.cached(admin), None);
        // The defaults are not created twice.
        auth.ensure_default_users_blocking().unwrap();
        assert_eq!(auth.users().unwrap().len(), 2);
    }

    #[test]
    fn basic_header_parsing() {
        assert_eq!(parse_basic("Basic YWRtaW46Y2hhbmdlaXQ="), Some(("admin".into(), "changeit".into())));
        assert_eq!(parse_basic("basic YTpiOmM="), Some(("a".into(), "b:c".into())));
        assert_eq!(parse_basic("Bearer x"), None);
        assert_eq!(parse_basic("Basic !!!"), None);
        assert_eq!(parse_basic("Basic YWRtaW4="), None);
    }
}
