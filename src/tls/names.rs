//! The name rules of node certificates, free of I/O: matching a host name or IP against a name a
//! certificate carries, and the reserved common name rule that decides whether a peer is a node
//! of this cluster.
//!
//! - An IP on either side matches only the same text, ignoring case.
//! - DNS names are compared label by label, ignoring case, and must have as many labels. A
//!   wildcard is only the whole left-most label (`*`) of a name of three labels or more; partial
//!   wildcards (`a*.example.org`) match nothing.
//! - Reserved name: a wildcard common name (`*.x.org`) must equal the reserved name exactly; a
//!   plain common name matches the reserved name by the rule above (`a.x.org` matches `a.x.org`
//!   and `*.x.org`).

/// Whether `name` (a host name or an IP, as dialled or as configured) is matched by `pattern`
/// (a name a certificate carries, possibly a wildcard).
pub fn name_matches(pattern: &str, name: &str) -> bool {
    let (pattern, name) = (pattern.trim_end_matches('.'), name.trim_end_matches('.'));
    if pattern.is_empty() || name.is_empty() {
        return false;
    }
    if is_ip(pattern) || is_ip(name) {
        return pattern.eq_ignore_ascii_case(name);
    }
    let p: Vec<&str> = pattern.split('.').collect();
    let n: Vec<&str> = name.split('.').collect();
    if p.len() != n.len() || n.iter().any(|l| l.is_empty()) {
        return false;
    }
    let wildcard = p[0] == "*" && p.len() >= 3;
    p.iter().zip(&n).enumerate().all(|(i, (pl, nl))| {
        if i == 0 && wildcard {
            return true;
        }
        !pl.contains('*') && pl.eq_ignore_ascii_case(nl)
    })
}

/// Whether a certificate whose subject common name is `cn` carries the reserved node name
/// `reserved`.
pub fn cn_matches_reserved(cn: &str, reserved: &str) -> bool {
    if cn.starts_with("*.") {
        return cn.eq_ignore_ascii_case(reserved);
    }
    name_matches(reserved, cn)
}

fn is_ip(s: &str) -> bool {
    s.parse::<std::net::IpAddr>().is_ok()
        || s.trim_start_matches('[').trim_end_matches(']').parse::<std::net::Ipv6Addr>().is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_label_by_label_with_a_leftmost_wildcard_only() {
        assert!(name_matches("node1.esdb.example.org", "NODE1.esdb.example.org"));
        assert!(name_matches("*.esdb.example.org", "node1.esdb.example.org"));
        assert!(!name_matches("*.esdb.example.org", "esdb.example.org"), "one label too few");
        assert!(!name_matches("*.esdb.example.org", "a.node1.esdb.example.org"), "one label too many");
        assert!(!name_matches("*.org", "example.org"), "a wildcard needs three labels");
        assert!(!name_matches("n*.esdb.example.org", "node1.esdb.example.org"), "partial wildcard");
        assert!(!name_matches("node1.*.example.org", "node1.esdb.example.org"), "inner wildcard");
        assert!(name_matches("eventstoredb-node", "eventstoredb-node"));
        assert!(!name_matches("", ""));
    }

    #[test]
    fn ips_match_exactly() {
        assert!(name_matches("127.0.0.1", "127.0.0.1"));
        assert!(!name_matches("127.0.0.1", "127.0.0.2"));
        assert!(!name_matches("*.0.0.1", "127.0.0.1"));
        assert!(name_matches("::1", "::1"));
        assert!(!name_matches("node1.example.org", "10.0.0.1"));
    }

    #[test]
    fn the_reserved_name_rule() {
        assert!(cn_matches_reserved("abc.x.com", "abc.x.com"));
        assert!(cn_matches_reserved("abc.x.com", "*.x.com"));
        assert!(cn_matches_reserved("*.x.com", "*.X.com"));
        assert!(!cn_matches_reserved("*.x.com", "abc.x.com"), "a wildcard CN must equal the reserved name");
        assert!(!cn_matches_reserved("abc.y.com", "*.x.com"));
        assert!(cn_matches_reserved("eventstoredb-node", "eventstoredb-node"));
        assert!(!cn_matches_reserved("other-node", "eventstoredb-node"));
    }
}
