//! Stream access control, decided per operation as EventStoreDB v5 decides it.
//!
//! The role list for an operation is the stream's own `$acl` entry, else the matching entry of the
//! `$settings` defaults (`$userStreamAcl` or `$systemStreamAcl`), else the built-in default: every
//! role (`$all`) for user streams, `$admins` for system streams. A metastream `$$s` is governed by
//! `$mr`/`$mw` of `s`; deleting it, or writing or deleting `$all`, is never allowed.

use crate::store::engine::{is_system, meta_target};
use crate::store::metadata::{Acl, StreamMetadata};

use super::Principal;

/// Role that everyone, the anonymous caller included, holds.
pub const ROLE_ALL: &str = "$all";
/// Role of administrators, who pass every check.
pub const ROLE_ADMINS: &str = "$admins";
/// Role of operators.
pub const ROLE_OPS: &str = "$ops";

/// A stream operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Read events (`$r`).
    Read,
    /// Append (`$w`).
    Write,
    /// Delete (`$d`).
    Delete,
    /// Read metadata (`$mr`).
    MetaRead,
    /// Write metadata (`$mw`).
    MetaWrite,
}

/// Default ACLs from the latest `$settings` event.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Settings {
    /// `$userStreamAcl`.
    pub user: Option<Acl>,
    /// `$systemStreamAcl`.
    pub system: Option<Acl>,
}

impl Settings {
    /// Parses `$settings` event data; anything unreadable counts as no defaults.
    pub fn parse(data: &[u8]) -> Settings {
        let Ok(serde_json::Value::Object(map)) = serde_json::from_slice::<serde_json::Value>(data) else {
            return Settings::default();
        };
        // The role lists have the shape of a metadata `$acl`, so the metadata parser reads them.
        let acl = |key: &str| {
            let v = map.get(key)?;
            let doc = serde_json::json!({ "$acl": v });
            StreamMetadata::parse(&serde_json::to_vec(&doc).ok()?).acl
        };
        Settings { user: acl("$userStreamAcl"), system: acl("$systemStreamAcl") }
    }
}

/// The outcome of a check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access {
    /// Whether the operation may go ahead.
    pub allowed: bool,
    /// Whether the role list grants `$all` (responses may be cached publicly).
    pub public: bool,
}

/// The stream whose metadata governs `op` on `stream`, and the operation checked there; `None`
/// when the operation is refused whatever the ACL says.
pub fn governing(stream: &str, op: Operation) -> Option<(&str, Operation)> {
    if let Some(base) = meta_target(stream) {
        return match op {
            Operation::Read | Operation::MetaRead => Some((base, Operation::MetaRead)),
            Operation::Write | Operation::MetaWrite => Some((base, Operation::MetaWrite)),
            Operation::Delete => None,
        };
    }
    if stream == "$all" && matches!(op, Operation::Write | Operation::Delete) {
        return None;
    }
    Some((stream, op))
}

fn entry(acl: &Acl, op: Operation) -> Option<&Vec<String>> {
    match op {
        Operation::Read => acl.read.as_ref(),
        Operation::Write => acl.write.as_ref(),
        Operation::Delete => acl.delete.as_ref(),
        Operation::MetaRead => acl.meta_read.as_ref(),
        Operation::MetaWrite => acl.meta_write.as_ref(),
    }
}

/// Decides `op` on `base` (a stream returned by [`governing`]) whose metadata is `meta`.
pub fn decide(
    principal: Option<&Principal>,
    base: &str,
    op: Operation,
    meta: &StreamMetadata,
    settings: &Settings,
) -> Access {
    let defaults = if is_system(base) { settings.system.as_ref() } else { settings.user.as_ref() };
    let builtin: &[&str] = if is_system(base) { &[ROLE_ADMINS] } else { &[ROLE_ALL] };
    let listed = meta.acl.as_ref().and_then(|a| entry(a, op)).or_else(|| defaults.and_then(|a| entry(a, op)));
    let grants = |role: &str| match listed {
        Some(roles) => roles.iter().any(|r| r == role),
        None => builtin.contains(&role),
    };
    if grants(ROLE_ALL) {
        return Access { allowed: true, public: true };
    }
    let allowed = match principal {
        None => false,
        Some(p) => p.is_admin() || p.roles().any(|r| !r.is_empty() && grants(r)),
    };
    Access { allowed, public: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(login: &str, groups: &[&str]) -> Principal {
        Principal { login: login.into(), groups: groups.iter().map(|g| g.to_string()).collect() }
    }

    #[test]
    fn defaults_and_overrides() {
        let none = StreamMetadata::default();
        let s = Settings::default();
        let bob = user("bob", &["dev"]);
        let admin = user("admin", &[ROLE_ADMINS]);
        assert_eq!(
            decide(None, "orders", Operation::Read, &none, &s),
            Access { allowed: true, public: true }
        );
        assert!(!decide(None, "$users", Operation::Read, &none, &s).allowed);
        assert!(!decide(Some(&bob), "$users", Operation::Read, &none, &s).allowed);
        assert!(decide(Some(&admin), "$users", Operation::Read, &none, &s).allowed);
        let meta = StreamMetadata::parse(br#"{"$acl":{"$r":"dev","$w":["bob"],"$d":""}}"#);
        assert!(decide(Some(&bob), "orders", Operation::Read, &meta, &s).allowed);
        assert!(!decide(None, "orders", Operation::Read, &meta, &s).allowed);
        assert!(decide(Some(&bob), "orders", Operation::Write, &meta, &s).allowed);
        assert!(!decide(Some(&bob), "orders", Operation::Delete, &meta, &s).allowed);
        assert!(decide(Some(&admin), "orders", Operation::Delete, &meta, &s).allowed);
        // Per-operation fallback: `$mr` is not in the stream ACL, so the default applies.
        assert!(decide(None, "orders", Operation::MetaRead, &meta, &s).allowed);
        let s = Settings::parse(br#"{"$userStreamAcl":{"$r":"$admins","$w":"dev"}}"#);
        assert!(!decide(None, "other", Operation::Read, &none, &s).allowed);
        assert!(decide(Some(&bob), "other", Operation::Write, &none, &s).allowed);
        assert_eq!(governing("$$orders", Operation::Delete), None);
        assert_eq!(governing("$$orders", Operation::Read), Some(("orders", Operation::MetaRead)));
        assert_eq!(governing("$all", Operation::Write), None);
    }
}
