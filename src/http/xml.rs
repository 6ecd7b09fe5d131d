//! A small XML reader for request bodies (`events+xml` batches, `text/xml` user commands).
//!
//! It reads elements, text, CDATA and the five predefined entities plus numeric references, and
//! skips the declaration, comments, processing instructions and attributes. Element trees become
//! JSON the way v5 converts them: an element with children is an object (repeated names make an
//! array), a leaf is its text. Depth is bounded so hostile input cannot exhaust the stack.

use serde_json::{Map, Value};

const DEPTH_MAX: usize = 64;

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

/// Parses `text` into the JSON form of its root element: `(root name, value)`.
pub fn parse(text: &str) -> Result<(String, Value), String> {
    let mut p = Parser { s: text, i: 0 };
    p.misc()?;
    let (name, v) = p.element(0)?;
    p.misc()?;
    if p.i != p.s.len() {
        return Err("content after the root element".into());
    }
    Ok((name, v))
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }

    fn skip_ws(&mut self) {
        let t = self.rest();
        self.i += t.len() - t.trim_start().len();
    }

    /// Skips whitespace, the declaration, comments, processing instructions and a doctype.
    fn misc(&mut self) -> Result<(), String> {
        loop {
            self.skip_ws();
            let (open, close) = if self.rest().starts_with("<?") {
                ("<?", "?>")
            } else if self.rest().starts_with("<!--") {
                ("<!--", "-->")
            } else if self.rest().starts_with("<!DOCTYPE") {
                ("<!DOCTYPE", ">")
            } else {
                return Ok(());
            };
            let end = self.rest()[open.len()..].find(close).ok_or("unterminated markup")?;
            self.i += open.len() + end + close.len();
        }
    }

    fn name(&mut self) -> Result<String, String> {
        let t = self.rest();
        let n = t.find(|c: char| c.is_whitespace() || c == '>' || c == '/').unwrap_or(t.len());
        if n == 0 {
            return Err("expected a name".into());
        }
        // Namespace prefixes are dropped: `<atom:title>` is `title`.
        let name = t[..n].rsplit(':').next().unwrap_or("").to_owned();
        self.i += n;
        Ok(name)
    }

    fn element(&mut self, depth: usize) -> Result<(String, Value), String> {
        if depth > DEPTH_MAX {
            return Err("elements nested too deeply".into());
        }
        if !self.rest().starts_with('<') {
            return Err("expected an element".into());
        }
        self.i += 1;
        let name = self.name()?;
        // Attributes are skipped (quoted values may hold '>').
        loop {
            self.skip_ws();
            let t = self.rest();
            if t.starts_with("/>") {
                self.i += 2;
                return Ok((name, Value::String(String::new())));
            }
            if t.starts_with('>') {
                self.i += 1;
                break;
            }
            let q = t.find(['"', '\'']).ok_or("bad attribute")?;
            let quote = t.as_bytes()[q] as char;
            let end = t[q + 1..].find(quote).ok_or("unterminated attribute")?;
            self.i += q + 1 + end + 1;
        }
        let mut text = String::new();
        let mut children: Vec<(String, Value)> = Vec::new();
        loop {
            let t = self.rest();
            if t.is_empty() {
                return Err("unterminated element".into());
            }
            if t.starts_with("</") {
                self.i += 2;
                let close = self.name()?;
                if close != name {
                    return Err(format!("mismatched closing tag {close}"));
                }
                self.skip_ws();
                if !self.rest().starts_with('>') {
                    return Err("bad closing tag".into());
                }
                self.i += 1;
                break;
            }
            if t.starts_with("<![CDATA[") {
                let end = t.find("]]>").ok_or("unterminated CDATA")?;
                text.push_str(&t[9..end]);
                self.i += end + 3;
            } else if t.starts_with("<!--") || t.starts_with("<?") {
                self.misc()?;
            } else if t.starts_with('<') {
                children.push(self.element(depth + 1)?);
            } else {
                let n = t.find('<').unwrap_or(t.len());
                text.push_str(&unentity(&t[..n])?);
                self.i += n;
            }
        }
        if children.is_empty() {
            return Ok((name, Value::String(text)));
        }
        let mut map = Map::new();
        for (k, v) in children {
            match map.get_mut(&k) {
                Some(Value::Array(xs)) => xs.push(v),
                Some(prev) => {
                    let first = std::mem::take(prev);
                    *prev = Value::Array(vec![first, v]);
                }
                None => {
                    map.insert(k, v);
                }
            }
        }
        Ok((name, Value::Object(map)))
    }
}

fn unentity(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(a) = rest.find('&') {
        out.push_str(&rest[..a]);
        let end = rest[a..].find(';').ok_or("unterminated entity")? + a;
        let ent = &rest[a + 1..end];
        let c = match ent {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let n = if let Some(h) = ent.strip_prefix("#x").or_else(|| ent.strip_prefix("#X")) {
                    u32::from_str_radix(h, 16).ok()
                } else {
                    ent.strip_prefix('#').and_then(|d| d.parse().ok())
                };
                n.and_then(char::from_u32).ok_or_else(|| format!("unknown entity &{ent};"))?
            }
        };
        out.push(c);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_event_batches() {
        let (root, v) = parse(
            "<?xml version=\"1.0\"?><Events><Event a=\"x>y\"><EventId>1</EventId><Data><b>1</b><b>2</b><c/></Data>\
             </Event><Event><EventId>2</EventId><Data>t &amp; <![CDATA[<x>]]></Data></Event></Events>",
        )
        .unwrap();
        assert_eq!(root, "Events");
        assert_eq!(
            v,
            serde_json::json!({"Event": [
                {"EventId": "1", "Data": {"b": ["1", "2"], "c": ""}},
                {"EventId": "2", "Data": "t & <x>"}
            ]})
        );
        assert!(parse("<a><b></a>").is_err());
        assert!(parse("<a>").is_err());
        assert!(parse(&"<a>".repeat(100)).is_err());
        assert!(parse("<a>&bogus;</a>").is_err());
    }
}
