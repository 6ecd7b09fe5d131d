//! The category rule of the system projections: which category a stream belongs to.
//!
//! A rule is a separator and a side: `First` takes the text before the first separator, `Last`
//! the text before the last one. The separator must stand after at least one character, and
//! streams whose name starts with `$` (system streams, metastreams, the projections' own output)
//! never have a category, so no projection output is ever categorised again.
//!
//! A rule is written as a projection's query text: two lines, `first` or `last` then the
//! separator (`first\r\n-` is the default), or one single character, which means `last` with that
//! separator.

/// Which separator ends the category.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// The first one.
    First,
    /// The last one.
    Last,
}

/// A category rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CategoryRule {
    /// Which separator.
    pub side: Side,
    /// The separator.
    pub separator: char,
}

/// The default rule's query text.
pub const DEFAULT_RULE: &str = "first\r\n-";

impl Default for CategoryRule {
    fn default() -> Self {
        CategoryRule { side: Side::First, separator: '-' }
    }
}

impl CategoryRule {
    /// Parses a query text (see the module doc); the error says what is wrong.
    pub fn parse(query: &str) -> Result<CategoryRule, String> {
        let mut chars = query.chars();
        if let (Some(c), None) = (chars.next(), chars.next()) {
            return Ok(CategoryRule { side: Side::Last, separator: c });
        }
        let mut lines = query.split('\n').map(|l| l.strip_suffix('\r').unwrap_or(l));
        let (Some(side), Some(sep), None) = (lines.next(), lines.next(), lines.next()) else {
            return Err(format!(
                "invalid category rule {query:?}: expected 'first' or 'last', a line break, then one separator character"
            ));
        };
        let side = match side.trim() {
            "first" => Side::First,
            "last" => Side::Last,
            other => return Err(format!("invalid category rule: {other:?} is neither 'first' nor 'last'")),
        };
        let mut sc = sep.chars();
        match (sc.next(), sc.next()) {
            (Some(separator), None) => Ok(CategoryRule { side, separator }),
            _ => Err(format!("invalid category rule: the separator {sep:?} must be one character")),
        }
    }

    /// The category of `stream`, if it has one.
    pub fn category<'a>(&self, stream: &'a str) -> Option<&'a str> {
        if stream.starts_with('$') {
            return None;
        }
        let at = match self.side {
            Side::First => stream.find(self.separator),
            Side::Last => stream.rfind(self.separator),
        }?;
        (at > 0).then(|| &stream[..at])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_and_last() {
        let first = CategoryRule::parse(DEFAULT_RULE).unwrap();
        assert_eq!(first, CategoryRule::default());
        assert_eq!(first.category("order-1-a"), Some("order"));
        let last = CategoryRule::parse("last\n-").unwrap();
        assert_eq!(last.category("order-1-a"), Some("order-1"));
        assert_eq!(CategoryRule::parse("_").unwrap(), CategoryRule { side: Side::Last, separator: '_' });
        assert_eq!(CategoryRule::parse("_").unwrap().category("a_b_c"), Some("a_b"));
        assert_eq!(CategoryRule::parse("first\r\n.").unwrap().category("x.y"), Some("x"));
    }

    #[test]
    fn no_category() {
        let r = CategoryRule::default();
        assert_eq!(r.category("nodash"), None);
        assert_eq!(r.category("-leading"), None, "the separator must follow a character");
        assert_eq!(r.category("$ce-order"), None);
        assert_eq!(r.category("$$order-1"), None);
        assert_eq!(r.category(""), None);
        assert_eq!(r.category("é-1"), Some("é"));
    }

    #[test]
    fn bad_rules() {
        for q in ["", "first", "middle\n-", "first\n--", "first\n", "first\n-\nx"] {
            assert!(CategoryRule::parse(q).is_err(), "{q:?}");
        }
    }
}
