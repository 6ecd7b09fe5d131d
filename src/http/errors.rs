//! Store and user errors as HTTP replies, with v5's statuses and reason phrases (a wrong expected
//! version is 400 `Wrong expected EventNumber`, a deleted stream 410, a missing user 404).
//!
//! Every match here names each variant, with no catch-all arm, so a new error variant fails to
//! compile until someone decides its status.

use http::StatusCode;

use super::media::Media;
use super::reply::Reply;
use crate::auth::{AuthFailure, UserError};
use crate::projections::feed::FeedError;
use crate::projections::ProjError;
use crate::store::{ReadError, StorageError, WriteError};
use crate::subscriptions::SubError;

/// A storage failure: 503 when the node cannot take writes now, 500 otherwise.
pub fn storage(e: &StorageError) -> Reply {
    let (status, what) = match e {
        StorageError::DiskFull(_) => (StatusCode::SERVICE_UNAVAILABLE, "Disk full"),
        StorageError::ReadOnly(_) => (StatusCode::SERVICE_UNAVAILABLE, "Read-only after a storage failure"),
        StorageError::Corrupt(_) => (StatusCode::INTERNAL_SERVER_ERROR, "Corruption detected"),
        StorageError::Io(_) => (StatusCode::INTERNAL_SERVER_ERROR, "Storage I/O error"),
    };
    tracing::warn!(error = %e, "storage error answered over HTTP");
    Reply::plain(status, what)
}

/// What kind of write failed, for the details that differ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteKind {
    /// An append: a version conflict carries `ES-CurrentVersion`.
    Append,
    /// A delete: a version conflict does not.
    Delete,
}

/// A refused or failed write.
pub fn write(e: &WriteError, kind: WriteKind) -> Reply {
    match e {
        WriteError::WrongExpectedVersion { current } => {
            let r = Reply::plain(StatusCode::BAD_REQUEST, "Wrong expected EventNumber");
            match kind {
                WriteKind::Append => r.header("es-currentversion", current.to_string()),
                WriteKind::Delete => r,
            }
        }
        WriteError::StreamDeleted => Reply::plain(StatusCode::GONE, "Stream deleted"),
        WriteError::InvalidStreamName(why) => Reply::bad_request(format!("Invalid stream name: {why}")),
        WriteError::EventTooLarge { size, max } => Reply::status(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Too large events received: an event of {size} bytes exceeds the limit of {max} bytes"),
        ),
        WriteError::InvalidEvent(why) => Reply::bad_request(format!("Invalid event: {why}")),
        WriteError::Storage(s) => storage(s),
        WriteError::NotLeader => Reply::plain(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready"),
        WriteError::CommitTimeout => Reply::plain(
            StatusCode::INTERNAL_SERVER_ERROR,
            match kind {
                WriteKind::Delete => "Delete timeout",
                _ => "Write timeout",
            },
        ),
    }
}

/// A failed read. Feeds get an empty body; single events get `{}` for JSON types.
pub fn read(e: &ReadError, single_event_media: Option<Media>) -> Reply {
    let body = |r: Reply| match single_event_media {
        Some(m) if m.is_json() => Reply { body: bytes::Bytes::from_static(b"{}"), ..r },
        _ => r,
    };
    match e {
        ReadError::NoStream => body(Reply::plain(StatusCode::NOT_FOUND, "Not Found")),
        ReadError::StreamDeleted => body(Reply::plain(StatusCode::GONE, "Deleted")),
        ReadError::InvalidPosition(p) => Reply::bad_request(format!("Invalid position argument: {p}")),
        ReadError::Storage(s) => storage(s),
    }
}

/// A failed persistent subscription request.
pub fn subscription(e: &SubError) -> Reply {
    match e {
        SubError::NotReady => Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready"),
        SubError::NotFound => Reply::status(StatusCode::NOT_FOUND, "Not Found"),
        SubError::Exists => Reply::status(StatusCode::CONFLICT, "Subscription group already exists"),
        SubError::Invalid(why) => Reply::bad_request(why.clone()),
        SubError::StreamDeleted => Reply::status(StatusCode::GONE, "Stream deleted"),
        SubError::TooManyConsumers => Reply::status(StatusCode::CONFLICT, "Maximum subscriber count reached"),
        SubError::Storage(s) => storage(s),
        SubError::Write(w) => write(w, WriteKind::Append),
    }
}

/// A failed projection request.
pub fn projection(e: &ProjError) -> Reply {
    match e {
        ProjError::NotReady => Reply::status(StatusCode::SERVICE_UNAVAILABLE, "Server Is Not Ready"),
        ProjError::NotFound => Reply::status(StatusCode::NOT_FOUND, "Not Found"),
        ProjError::NotAuthorized => Reply::unauthorized(),
        ProjError::Invalid(why) => Reply::bad_request(why.clone()),
        ProjError::Conflict(why) => Reply::status(StatusCode::CONFLICT, why.clone()),
        ProjError::OperationFailed(why) => Reply::status(StatusCode::INTERNAL_SERVER_ERROR, why.clone()),
        ProjError::Storage(s) => storage(s),
        ProjError::Write(w) => write(w, WriteKind::Append),
    }
}

/// A `read-events` page that could not be read: a bad position is the request's fault.
pub fn feed(e: &FeedError) -> Reply {
    match e {
        FeedError::NotARecord(_) | FeedError::PastEnd { .. } => {
            Reply::bad_request(format!("Invalid position: {e}"))
        }
        FeedError::Storage(s) => storage(s),
        FeedError::Target(why) => Reply::status(StatusCode::INTERNAL_SERVER_ERROR, why.clone()),
    }
}

/// Credentials that did not pass.
pub fn auth(e: &AuthFailure) -> Reply {
    match e {
        AuthFailure::Unauthorized => Reply::unauthorized(),
        AuthFailure::Storage(s) => {
            Reply::status(StatusCode::SERVICE_UNAVAILABLE, format!("Not yet ready. {s}"))
        }
    }
}

/// The status and `error` name of a failed user operation.
pub fn user(e: &UserError) -> (StatusCode, &'static str) {
    match e {
        UserError::NotFound => (StatusCode::NOT_FOUND, "NotFound"),
        UserError::Conflict => (StatusCode::CONFLICT, "Conflict"),
        UserError::Unauthorized => (StatusCode::UNAUTHORIZED, "Unauthorized"),
        UserError::Invalid(_) => (StatusCode::BAD_REQUEST, "Error"),
        UserError::Write(w) => match w {
            WriteError::Storage(s) => (storage(s).status, "Error"),
            WriteError::NotLeader => (StatusCode::SERVICE_UNAVAILABLE, "NotReady"),
            WriteError::CommitTimeout => (StatusCode::INTERNAL_SERVER_ERROR, "Error"),
            WriteError::WrongExpectedVersion { .. } => (StatusCode::REQUEST_TIMEOUT, "TryAgain"),
            WriteError::StreamDeleted
            | WriteError::InvalidStreamName(_)
            | WriteError::EventTooLarge { .. }
            | WriteError::InvalidEvent(_) => (StatusCode::BAD_REQUEST, "Error"),
        },
    }
}

/// A reload of the certificates that changed nothing: the reason phrase says so, the body says
/// why.
pub fn reload(e: &crate::tls::ReloadError) -> Reply {
    use crate::tls::ReloadError;
    let (status, what) = match e {
        ReloadError::Cert(_) | ReloadError::Config(_) | ReloadError::Options(_) => {
            (StatusCode::INTERNAL_SERVER_ERROR, "Certificates not reloaded")
        }
        ReloadError::InProgress => (StatusCode::CONFLICT, "Reload already in progress"),
    };
    let mut r = Reply::body(status, Media::TextPlain, format!("{what}: {e}\n"));
    r.reason = Some(what.into());
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_has_its_status() {
        let io = StorageError::Io("x".into());
        assert_eq!(storage(&StorageError::DiskFull("x".into())).status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(storage(&StorageError::ReadOnly("x".into())).status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(storage(&StorageError::Corrupt("x".into())).status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(storage(&io).status, StatusCode::INTERNAL_SERVER_ERROR);
        let wrong = WriteError::WrongExpectedVersion { current: 7 };
        let r = write(&wrong, WriteKind::Append);
        assert_eq!(
            (r.status, r.reason.as_deref()),
            (StatusCode::BAD_REQUEST, Some("Wrong expected EventNumber"))
        );
        assert!(r.headers.iter().any(|(k, v)| k == "es-currentversion" && v == "7"));
        assert!(write(&wrong, WriteKind::Delete).headers.is_empty());
        assert_eq!(write(&WriteError::StreamDeleted, WriteKind::Append).status, StatusCode::GONE);
        assert_eq!(
            write(&WriteError::InvalidStreamName("x"), WriteKind::Append).status,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            write(&WriteError::EventTooLarge { size: 2, max: 1 }, WriteKind::Append).status,
            StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            write(&WriteError::InvalidEvent("x".into()), WriteKind::Append).status,
            StatusCode::BAD_REQUEST
        );
        assert_eq!(
            write(&WriteError::Storage(io.clone()), WriteKind::Append).status,
            StatusCode::INTERNAL_SERVER_ERROR
        );
        let r = read(&ReadError::NoStream, Some(Media::Json));
        assert_eq!((r.status, &r.body[..]), (StatusCode::NOT_FOUND, &b"{}"[..]));
        assert_eq!(read(&ReadError::NoStream, Some(Media::AtomXml)).body.len(), 0);
        assert_eq!(read(&ReadError::StreamDeleted, None).reason.as_deref(), Some("Deleted"));
        assert_eq!(read(&ReadError::InvalidPosition(3), None).status, StatusCode::BAD_REQUEST);
        assert_eq!(read(&ReadError::Storage(io.clone()), None).status, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(auth(&AuthFailure::Unauthorized).status, StatusCode::UNAUTHORIZED);
        assert_eq!(auth(&AuthFailure::Storage(io.clone())).status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(user(&UserError::NotFound), (StatusCode::NOT_FOUND, "NotFound"));
        assert_eq!(user(&UserError::Conflict), (StatusCode::CONFLICT, "Conflict"));
        assert_eq!(user(&UserError::Unauthorized), (StatusCode::UNAUTHORIZED, "Unauthorized"));
        assert_eq!(user(&UserError::Write(wrong)), (StatusCode::REQUEST_TIMEOUT, "TryAgain"));
        assert_eq!(user(&UserError::Write(WriteError::Storage(io.clone()))).1, "Error");
        for (e, status) in [
            (SubError::NotReady, StatusCode::SERVICE_UNAVAILABLE),
            (SubError::NotFound, StatusCode::NOT_FOUND),
            (SubError::Exists, StatusCode::CONFLICT),
            (SubError::Invalid("x".into()), StatusCode::BAD_REQUEST),
            (SubError::StreamDeleted, StatusCode::GONE),
            (SubError::TooManyConsumers, StatusCode::CONFLICT),
            (SubError::Storage(io.clone()), StatusCode::INTERNAL_SERVER_ERROR),
            (SubError::Write(WriteError::NotLeader), StatusCode::SERVICE_UNAVAILABLE),
        ] {
            assert_eq!(subscription(&e).status, status, "{e:?}");
        }
    }
}
