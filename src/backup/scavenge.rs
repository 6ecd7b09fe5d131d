//! Keeping scavenges out of a backup: files must not be copied while a scavenge runs, so the
//! backup asks the node to stop a running scavenge first and to resume it afterwards.
//!
//! [`ScavengeControl`] is what the backup procedure needs; [`HttpScavenge`] asks a node over its
//! HTTP API (`GET /admin/scavenge/current`, `DELETE /admin/scavenge/{id}`, which answers once the
//! run has stopped at a checkpoint, and `POST /admin/scavenge`, which resumes from that
//! checkpoint) with the tools' [`NodeClient`], so it also runs in the simulator. A node that serves
//! TLS is asked over HTTPS ([`HttpsTarget`]): its certificate must chain to the roots given and
//! carry the host name or address dialled.
//!
//! Invariant: a scavenge this module stopped is resumed by [`ScavengeControl::resume`] and by
//! nothing else; a failure to reach the node is an error, never taken for "no scavenge runs".

use std::net::SocketAddr;
use std::time::Duration;

use crate::env::{BoxFuture, Env};
use crate::tools::client::{HttpsTarget, NodeClient, Reply};

use super::BackupError;

/// Stops and resumes a node's scavenge for the length of a backup.
pub trait ScavengeControl: Send {
    /// Stops the running scavenge, if any, and returns its id once it has stopped.
    fn stop_running(&mut self) -> BoxFuture<'_, Result<Option<String>, BackupError>>;
    /// Resumes a scavenge stopped by [`ScavengeControl::stop_running`]; returns the new run's id.
    fn resume(&mut self) -> BoxFuture<'_, Result<String, BackupError>>;
}

/// A node's HTTP API, with credentials of a user in `$ops` or `$admins`.
pub struct HttpScavenge {
    client: NodeClient,
}

impl HttpScavenge {
    /// A client of the node at `addr`.
    pub fn new(env: Env, addr: SocketAddr, user: &str, password: &str) -> HttpScavenge {
        let client = NodeClient::new(env, &addr.ip().to_string(), addr.port())
            .with_credentials(user, password)
            // A stop answers once the run has reached a checkpoint.
            .with_timeout(Duration::from_secs(300));
        HttpScavenge { client }
    }

    /// Through `client` (its credentials and TLS as given; a deadline long enough for a stop).
    pub fn of(client: NodeClient) -> HttpScavenge {
        HttpScavenge { client: client.with_timeout(Duration::from_secs(300)) }
    }

    /// Speaks HTTPS to the node.
    pub fn with_tls(mut self, tls: HttpsTarget) -> HttpScavenge {
        self.client = self.client.with_tls(tls);
        self
    }

    /// Whether the node answers at all (a connection can be opened).
    pub async fn reachable(&self) -> bool {
        self.client.reachable().await
    }

    async fn request(&self, method: &str, path: &str) -> Result<Reply, BackupError> {
        self.client.request(method, path, "").await.map_err(|e| match e {
            crate::tools::client::ClientError::Tls(..) => {
                BackupError::Scavenge(format!("{e} (check --ca-certificate and the host in --url)"))
            }
            e => BackupError::Scavenge(format!("{e} (to control scavenges)")),
        })
    }

    fn refused(&self, what: &str, r: &Reply) -> BackupError {
        let hint = if r.status == 401 {
            " (the user must be in $ops or $admins: check --user/--password)"
        } else {
            ""
        };
        BackupError::Scavenge(format!("{what}: the node answered {} {}{hint}", r.status, r.body.trim()))
    }
}

fn scavenge_id(body: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    v.get("scavengeId").and_then(|s| s.as_str()).map(str::to_string)
}

impl ScavengeControl for HttpScavenge {
    fn stop_running(&mut self) -> BoxFuture<'_, Result<Option<String>, BackupError>> {
        Box::pin(async move {
            let r = self.request("GET", "/admin/scavenge/current").await?;
            if r.status != 200 {
                return Err(self.refused("asking for the running scavenge", &r));
            }
            let id = scavenge_id(&r.body).ok_or_else(|| {
                BackupError::Scavenge(format!("unexpected reply to GET /admin/scavenge/current: {}", r.body))
            })?;
            if id.is_empty() {
                return Ok(None);
            }
            let r = self.request("DELETE", &format!("/admin/scavenge/{id}")).await?;
            match r.status {
                200 => Ok(Some(id)),
                // It finished between the two requests.
                404 => Ok(None),
                _ => Err(self.refused(&format!("stopping scavenge {id}"), &r)),
            }
        })
    }

    fn resume(&mut self) -> BoxFuture<'_, Result<String, BackupError>> {
        Box::pin(async move {
            let r = self.request("POST", "/admin/scavenge").await?;
            if r.status != 200 {
                return Err(self.refused("resuming the scavenge", &r));
            }
            scavenge_id(&r.body).ok_or_else(|| {
                BackupError::Scavenge(format!("unexpected reply to POST /admin/scavenge: {}", r.body))
            })
        })
    }
}

/// For a node that is not running (its lock was taken): nothing to stop or resume.
pub struct NoNode;

impl ScavengeControl for NoNode {
    fn stop_running(&mut self) -> BoxFuture<'_, Result<Option<String>, BackupError>> {
        Box::pin(async { Ok(None) })
    }
    fn resume(&mut self) -> BoxFuture<'_, Result<String, BackupError>> {
        Box::pin(async { Err(BackupError::Scavenge("no node to resume a scavenge on".into())) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scavenge_id_is_read_from_the_reply() {
        assert_eq!(scavenge_id(r#"{"scavengeId":"x","scavengeLink":""}"#).as_deref(), Some("x"));
        assert_eq!(scavenge_id("not json"), None);
    }
}
