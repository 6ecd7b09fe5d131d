//! User records and their changes, as events in `$user-<login>`, `$users` and
//! `$users-password-notifications`.

use base64::Engine as _;
use bytes::Bytes;
use serde::{Deserialize, Serialize};

use super::{password, Auth};
use std::future::Future as _;

use crate::store::{NewEvent, ReadError, StorageError, WriteError, WriteOp, WriteResult, ANY, NO_STREAM};

/// Index stream of logins.
pub const USERS_STREAM: &str = "$users";
/// Password change notifications.
pub const PASSWORD_NOTIFICATIONS_STREAM: &str = "$users-password-notifications";
/// Longest login name, in bytes.
pub const LOGIN_BYTES_MAX: usize = 256;

/// A user as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UserRecord {
    /// Login name.
    #[serde(rename = "loginName")]
    pub login: String,
    /// Full name.
    #[serde(default)]
    pub full_name: String,
    /// Salt (base64).
    #[serde(default)]
    pub salt: String,
    /// PBKDF2-HMAC-SHA256 of the password (base64).
    #[serde(default)]
    pub hash: String,
    /// Iterations of the hash.
    #[serde(default)]
    pub iterations: u32,
    /// Whether the user may not log in.
    #[serde(default)]
    pub disabled: bool,
    /// Groups.
    #[serde(default)]
    pub groups: Vec<String>,
    /// When the record was last written (µs since the epoch; from the event, not stored).
    #[serde(skip)]
    pub updated_us: i64,
}

impl UserRecord {
    /// Whether `candidate` is this user's password.
    pub fn password_matches(&self, candidate: &str) -> bool {
        let b64 = &base64::engine::general_purpose::STANDARD;
        match (b64.decode(&self.salt), b64.decode(&self.hash)) {
            (Ok(salt), Ok(hash)) => password::verify(candidate, &salt, self.iterations, &hash),
            _ => false,
        }
    }
}

/// Why a user operation failed (mapped to 404, 409, 401, 400 and 500/503 by the HTTP layer).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UserError {
    /// No such user.
    #[error("user not found")]
    NotFound,
    /// The user exists with another password.
    #[error("user already exists")]
    Conflict,
    /// The current password did not match.
    #[error("wrong current password")]
    Unauthorized,
    /// Bad input (login, body).
    #[error("{0}")]
    Invalid(String),
    /// The write failed.
    #[error(transparent)]
    Write(#[from] WriteError),
}

impl From<StorageError> for UserError {
    fn from(e: StorageError) -> Self {
        UserError::Write(WriteError::Storage(e))
    }
}

/// The stream of a user.
pub fn user_stream(login: &str) -> String {
    format!("$user-{login}")
}

/// Checks a login name.
pub fn validate_login(login: &str) -> Result<(), UserError> {
    if login.is_empty()
        || login.len() > LOGIN_BYTES_MAX
        || login.chars().any(|c| c.is_control() || c == '/' || c == ':')
    {
        return Err(UserError::Invalid("invalid login name".into()));
    }
    Ok(())
}

impl Auth {
    fn event(&self, event_type: &str, data: Vec<u8>, is_json: bool) -> NewEvent {
        NewEvent {
            id: *self.env.new_uuid().as_bytes(),
            event_type: event_type.into(),
            data: Bytes::from(data),
            metadata: Bytes::new(),
            is_json,
        }
    }

    fn record_bytes(rec: &UserRecord) -> Vec<u8> {
        serde_json::to_vec(rec).unwrap_or_default()
    }

    /// The user `login`, if it exists (blocking).
    pub fn user(&self, login: &str) -> Result<Option<UserRecord>, StorageError> {
        if validate_login(login).is_err() {
            return Ok(None);
        }
        let now = self.env.clock.wall_micros();
        match self.store.read_event(&user_stream(login), -1, false, now) {
            Ok(Some(e)) => Ok(serde_json::from_slice::<UserRecord>(&e.event.data).ok().map(|mut r| {
                r.updated_us = e.event.timestamp_us;
                r
            })),
            Ok(None)
            | Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => Ok(None),
            Err(ReadError::Storage(e)) => Err(e),
        }
    }

    /// Every user, sorted by login (blocking).
    pub fn users(&self) -> Result<Vec<UserRecord>, StorageError> {
        let now = self.env.clock.wall_micros();
        let mut logins = std::collections::BTreeSet::new();
        let mut from = 0;
        loop {
            let slice = match self.store.read_forward(USERS_STREAM, from, 4096, false, now) {
                Ok(s) => s,
                Err(ReadError::NoStream | ReadError::StreamDeleted | ReadError::InvalidPosition(_)) => break,
                Err(ReadError::Storage(e)) => return Err(e),
            };
            for e in &slice.events {
                if let Ok(l) = std::str::from_utf8(&e.event.data) {
                    logins.insert(l.to_owned());
                }
            }
            if slice.is_end_of_stream || slice.events.is_empty() {
                break;
            }
            from = slice.next_event_number;
        }
        let mut out = Vec::new();
        for l in logins {
            if let Some(u) = self.user(&l)? {
                out.push(u);
            }
        }
        Ok(out)
    }

    /// Creates a user; creating an existing user again with the same password succeeds. The writes
    /// go through [`Store::append_async`](crate::store::Store::append_async): on a cluster leader
    /// they wait for a quorum without holding a thread (the reads before them are blocking).
    pub async fn create_user(
        &self,
        login: &str,
        full_name: &str,
        groups: Vec<String>,
        password: &str,
    ) -> Result<(), UserError> {
        let write = |s: String, e: i64, evs: Vec<NewEvent>| {
            let store = self.store.clone();
            async move { store.append_async(&s, e, evs).await }
        };
        self.create_user_with(login, full_name, groups, password, write).await
    }

    /// [`Auth::create_user`] with its appends made by `write` (stream, expected version, events).
    async fn create_user_with<F>(
        &self,
        login: &str,
        full_name: &str,
        groups: Vec<String>,
        password: &str,
        write: impl Fn(String, i64, Vec<NewEvent>) -> F,
    ) -> Result<(), UserError>
    where
        F: std::future::Future<Output = Result<WriteResult, WriteError>>,
    {
        validate_login(login)?;
        if let Some(existing) = self.user(login)? {
            return if existing.password_matches(password) { Ok(()) } else { Err(UserError::Conflict) };
        }
        let (salt, hash, iterations) = self.hash_password(password);
        let b64 = &base64::engine::general_purpose::STANDARD;
        let rec = UserRecord {
            login: login.into(),
            full_name: full_name.into(),
            salt: b64.encode(salt),
            hash: b64.encode(hash),
            iterations,
            disabled: false,
            groups,
            updated_us: 0,
        };
        let created = self.event("$UserCreated", Self::record_bytes(&rec), true);
        match write(user_stream(login), NO_STREAM, vec![created]).await {
            Ok(_) => {}
            // Someone created it at the same moment: decide as for an existing user.
            Err(WriteError::WrongExpectedVersion { .. }) => {
                return match self.user(login)? {
                    Some(u) if u.password_matches(password) => Ok(()),
                    _ => Err(UserError::Conflict),
                }
            }
            Err(e) => return Err(e.into()),
        }
        write(USERS_STREAM.to_owned(), ANY, vec![self.event("$User", login.as_bytes().to_vec(), false)])
            .await?;
        Ok(())
    }

    async fn update_user(
        &self,
        login: &str,
        change: impl FnOnce(&mut UserRecord),
    ) -> Result<UserRecord, UserError> {
        let mut rec = self.user(login)?.ok_or(UserError::NotFound)?;
        change(&mut rec);
        let ev = self.event("$UserUpdated", Self::record_bytes(&rec), true);
        self.store.append_async(&user_stream(login), ANY, vec![ev]).await?;
        Ok(rec)
    }

    /// Replaces a user's full name and groups.
    pub async fn update_details(
        &self,
        login: &str,
        full_name: &str,
        groups: Vec<String>,
    ) -> Result<(), UserError> {
        self.update_user(login, |r| {
            r.full_name = full_name.into();
            r.groups = groups;
        })
        .await
        .map(drop)
    }

    /// Enables or disables a user.
    pub async fn set_disabled(&self, login: &str, disabled: bool) -> Result<(), UserError> {
        self.update_user(login, |r| r.disabled = disabled).await.map(drop)
    }

    /// Sets a new password.
    pub async fn reset_password(&self, login: &str, new_password: &str) -> Result<(), UserError> {
        let (salt, hash, iterations) = self.hash_password(new_password);
        let b64 = &base64::engine::general_purpose::STANDARD;
        self.update_user(login, |r| {
            r.salt = b64.encode(salt);
            r.hash = b64.encode(hash);
            r.iterations = iterations;
        })
        .await?;
        let note = serde_json::to_vec(&serde_json::json!({ "loginName": login })).unwrap_or_default();
        self.store
            .append_async(
                PASSWORD_NOTIFICATIONS_STREAM,
                ANY,
                vec![self.event("$PasswordChanged", note, true)],
            )
            .await?;
        Ok(())
    }

    /// Changes a password after checking the current one.
    pub async fn change_password(
        &self,
        login: &str,
        current: &str,
        new_password: &str,
    ) -> Result<(), UserError> {
        let rec = self.user(login)?.ok_or(UserError::NotFound)?;
        if !rec.password_matches(current) {
            return Err(UserError::Unauthorized);
        }
        self.reset_password(login, new_password).await
    }

    /// Deletes a user (soft-deletes its stream).
    pub async fn delete_user(&self, login: &str) -> Result<(), UserError> {
        if self.user(login)?.is_none() {
            return Err(UserError::NotFound);
        }
        let op = WriteOp::Delete { stream: user_stream(login), expected: ANY, hard: false };
        self.store.write_async(op).await?;
        Ok(())
    }

    /// Creates `admin` and `ops` (password `changeit`) when their streams were never written
    /// (when a cluster node becomes the leader: the writes wait for a quorum without holding a
    /// thread, which the simulator, running blocking work inline, needs).
    pub async fn ensure_default_users(&self) -> Result<(), UserError> {
        for (login, full_name, group) in self.missing_default_users()? {
            self.create_user(login, full_name, vec![group.to_owned()], "changeit").await?;
        }
        Ok(())
    }

    /// [`Auth::ensure_default_users`] for a single node's start (blocking): its writes are
    /// [`Store::append`](crate::store::Store::append)s, which never wait for a quorum.
    pub fn ensure_default_users_blocking(&self) -> Result<(), UserError> {
        for (login, full_name, group) in self.missing_default_users()? {
            let write =
                |s: String, e: i64, evs: Vec<NewEvent>| std::future::ready(self.store.append(&s, e, evs));
            let create = self.create_user_with(login, full_name, vec![group.to_owned()], "changeit", write);
            // Every write is a ready future, so the creation completes in one poll.
            let mut create = std::pin::pin!(create);
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            match create.as_mut().poll(&mut cx) {
                std::task::Poll::Ready(r) => r?,
                std::task::Poll::Pending => unreachable!("blocking writes never leave the future pending"),
            }
        }
        Ok(())
    }

    fn missing_default_users(&self) -> Result<Vec<(&'static str, &'static str, &'static str)>, UserError> {
        let defaults = [
            ("admin", "Event Store Administrator", super::acl::ROLE_ADMINS),
            ("ops", "Event Store Operations", super::acl::ROLE_OPS),
        ];
        let mut out = Vec::new();
        for d in defaults {
            let st = self.store.stream_state(&user_stream(d.0))?;
            if st.last < 0 && st.meta_last < 0 {
                out.push(d);
            }
        }
        Ok(out)
    }
}
