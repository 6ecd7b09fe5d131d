//! Event batches in JSON (`application/vnd.eventstore.events+json`, and the `event+json` and
//! `atom+json` bodies v5 reads the same way): one pass over the body that validates it as JSON
//! and picks each event's `eventId`, `eventType`, `data` and `metadata` as slices of it, without
//! building values.
//!
//! What it accepts is what `serde_json::from_slice` accepts for the same shape (an array of
//! objects; the test module checks the two against each other on generated and mutated bodies):
//! UTF-8 text (checked inside strings as they are scanned: elsewhere only ASCII is valid JSON);
//! JSON whitespace only; no trailing commas or trailing text; numbers by the JSON grammar (no
//! leading zeros); strings without raw control characters, escapes among `"\/bfnrt` and `\uXXXX`
//! (a lone surrogate is accepted in values, as serde_json accepts it when it skips a value; keys
//! and the picked strings are decoded, and are refused there). Nesting inside a value has no
//! depth limit: it is tracked on a heap stack bounded by the body length, so no input can
//! exhaust the thread's stack.
//!
//! Keys match case-insensitively after unescaping; the last of repeated keys wins.

/// One event of a batch: the raw JSON text (valid UTF-8) of each known key's value.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct RawItem<'a> {
    /// `eventId`.
    pub id: Option<&'a [u8]>,
    /// `eventType`.
    pub event_type: Option<&'a [u8]>,
    /// `data`.
    pub data: Option<&'a [u8]>,
    /// `metadata`.
    pub metadata: Option<&'a [u8]>,
}

/// The items of a JSON array of objects; `None` when `body` is not one (empty arrays included).
pub fn items(body: &[u8]) -> Option<Vec<RawItem<'_>>> {
    let mut p = Scan { b: body, at: 0 };
    p.ws();
    p.eat(b'[')?;
    p.ws();
    let mut out = Vec::new();
    if p.peek() == Some(b']') {
        p.at += 1;
    } else {
        loop {
            out.push(p.item()?);
            p.ws();
            match p.next()? {
                b',' => p.ws(),
                b']' => break,
                _ => return None,
            }
        }
    }
    p.ws();
    (p.at == p.b.len() && !out.is_empty()).then_some(out)
}

/// The text of a JSON string value: borrowed when it has no escapes; `None` when `raw` is not a
/// string or decodes to no valid text (a lone surrogate).
pub fn string_of(raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let inner = raw.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
    if inner.contains(&b'\\') {
        serde_json::from_slice::<String>(raw).ok().map(std::borrow::Cow::Owned)
    } else {
        std::str::from_utf8(inner).ok().map(std::borrow::Cow::Borrowed)
    }
}

/// A cursor over UTF-8 JSON text.
struct Scan<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Scan<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.at).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let c = self.peek()?;
        self.at += 1;
        Some(c)
    }

    fn eat(&mut self, c: u8) -> Option<()> {
        (self.next()? == c).then_some(())
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    /// One event object, at its `{`.
    fn item(&mut self) -> Option<RawItem<'a>> {
        self.eat(b'{')?;
        self.ws();
        let mut item = RawItem::default();
        if self.peek() == Some(b'}') {
            self.at += 1;
            return Some(item);
        }
        loop {
            let key_at = self.at;
            let key_end = self.key()?;
            // Keys are compared as bytes; only one with escapes is decoded first.
            let raw_key = &self.b[key_at..key_end];
            let decoded;
            let key = match &raw_key[1..raw_key.len() - 1] {
                k if !k.contains(&b'\\') => k,
                _ => {
                    decoded = string_of(raw_key)?;
                    decoded.as_bytes()
                }
            };
            let value_at = self.at;
            self.value()?;
            let value = &self.b[value_at..self.at];
            let slot = if key.eq_ignore_ascii_case(b"eventId") {
                Some(&mut item.id)
            } else if key.eq_ignore_ascii_case(b"eventType") {
                Some(&mut item.event_type)
            } else if key.eq_ignore_ascii_case(b"data") {
                Some(&mut item.data)
            } else if key.eq_ignore_ascii_case(b"metadata") {
                Some(&mut item.metadata)
            } else {
                None
            };
            if let Some(slot) = slot {
                *slot = Some(value);
            }
            self.ws();
            match self.next()? {
                b',' => self.ws(),
                b'}' => return Some(item),
                _ => return None,
            }
        }
    }

    /// A key, its colon and the whitespace after it; the end of the key's string.
    fn key(&mut self) -> Option<usize> {
        if self.peek() != Some(b'"') {
            return None;
        }
        self.string()?;
        let end = self.at;
        self.ws();
        self.eat(b':')?;
        self.ws();
        Some(end)
    }

    /// One value (leading whitespace already skipped); containers are tracked on `open`, a stack
    /// of the closing bytes still expected.
    fn value(&mut self) -> Option<()> {
        let mut open: Vec<u8> = Vec::new();
        loop {
            match self.peek()? {
                b'{' | b'[' => {
                    let close = if self.next()? == b'{' { b'}' } else { b']' };
                    self.ws();
                    if self.peek() == Some(close) {
                        self.at += 1;
                    } else {
                        open.push(close);
                        if close == b'}' {
                            self.key()?;
                        }
                        continue;
                    }
                }
                b'"' => self.string()?,
                b't' => self.literal(b"true")?,
                b'f' => self.literal(b"false")?,
                b'n' => self.literal(b"null")?,
                b'-' | b'0'..=b'9' => self.number()?,
                _ => return None,
            }
            // A value ended: close what it ends, or go on to the next element.
            loop {
                let Some(&close) = open.last() else { return Some(()) };
                self.ws();
                match self.next()? {
                    b',' => {
                        self.ws();
                        if close == b'}' {
                            self.key()?;
                        }
                        break;
                    }
                    c if c == close => {
                        open.pop();
                    }
                    _ => return None,
                }
            }
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<()> {
        let end = self.at + word.len();
        (self.b.get(self.at..end)? == word).then(|| self.at = end)
    }

    fn digits(&mut self) -> usize {
        let from = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - from
    }

    /// `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`
    fn number(&mut self) -> Option<()> {
        if self.peek() == Some(b'-') {
            self.at += 1;
        }
        match self.next()? {
            b'0' => {
                if matches!(self.peek(), Some(b'0'..=b'9')) {
                    return None;
                }
            }
            b'1'..=b'9' => {
                self.digits();
            }
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.at += 1;
            if self.digits() == 0 {
                return None;
            }
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.at += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.at += 1;
            }
            if self.digits() == 0 {
                return None;
            }
        }
        Some(())
    }

    /// A string, at its opening quote; plain ASCII runs are skipped by the shared SIMD scan, and
    /// each run of non-ASCII bytes must be whole UTF-8 characters.
    fn string(&mut self) -> Option<()> {
        self.at += 1;
        loop {
            self.at += super::text::json_clean_run(&self.b[self.at..], true);
            let wide = self.b[self.at..].iter().take_while(|&&c| c >= 0x80).count();
            if wide > 0 {
                std::str::from_utf8(&self.b[self.at..self.at + wide]).ok()?;
                self.at += wide;
                continue;
            }
            match self.next()? {
                b'"' => return Some(()),
                b'\\' => match self.next()? {
                    b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                    b'u' => {
                        let hex = self.b.get(self.at..self.at + 4)?;
                        if !hex.iter().all(u8::is_ascii_hexdigit) {
                            return None;
                        }
                        self.at += 4;
                    }
                    _ => return None,
                },
                // A raw control character.
                _ => return None,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::value::RawValue;

    /// The oracle: serde_json's reading of an array of objects, each as its (key, raw value)
    /// pairs in order.
    struct Pairs<'a>(Vec<(String, &'a RawValue)>);

    impl<'de> serde::Deserialize<'de> for Pairs<'de> {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl<'de> serde::de::Visitor<'de> for V {
                type Value = Pairs<'de>;
                fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                    f.write_str("an object")
                }
                fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Pairs<'de>, A::Error> {
                    let mut out = Vec::new();
                    while let Some(k) = map.next_key::<String>()? {
                        out.push((k, map.next_value::<&'de RawValue>()?));
                    }
                    Ok(Pairs(out))
                }
            }
            d.deserialize_map(V)
        }
    }

    fn oracle(body: &[u8]) -> Option<Vec<RawItem<'_>>> {
        let items: Vec<Pairs<'_>> = serde_json::from_slice(body).ok()?;
        fn pick<'a>(p: &Pairs<'a>, key: &str) -> Option<&'a [u8]> {
            p.0.iter().rev().find(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v.get().as_bytes())
        }
        let out: Vec<RawItem<'_>> = items
            .iter()
            .map(|p| RawItem {
                id: pick(p, "eventId"),
                event_type: pick(p, "eventType"),
                data: pick(p, "data"),
                metadata: pick(p, "metadata"),
            })
            .collect();
        (!out.is_empty()).then_some(out)
    }

    fn agree(body: &[u8]) {
        assert_eq!(items(body), oracle(body), "{:?}", String::from_utf8_lossy(body));
    }

    #[test]
    fn agrees_with_serde_json_on_edge_cases() {
        let deep = |n: usize| format!("[{{\"data\":{}{}}}]", "[".repeat(n), "]".repeat(n));
        let cases: Vec<String> = [
            "[]", "[{}]", " [ { } ] \n", "[{},]", "[{}", "[{}] x", "[1]", "[[]]", "{}", "null", "",
            r#"[{"data":{"a":[1,2,{"b":null}]},"eventType":"t","eventId":"fbf4b1a1-b4a3-4dfe-a01f-ec52c34e16e4"}]"#,
            r#"[{"DATA":1,"data":2}]"#, r#"[{"event\u0049d":"x"}]"#, r#"[{"\ud800":1}]"#, r#"[{"a":"\ud800"}]"#,
            r#"[{"a":01}]"#, r#"[{"a":1.}]"#, r#"[{"a":-}]"#, r#"[{"a":1e}]"#, r#"[{"a":1E+5}]"#, r#"[{"a":-0.0e-0}]"#,
            r#"[{"a":123456789012345678901234567890}]"#, r#"[{"a":.5}]"#, r#"[{"a":+1}]"#, r#"[{"a":"\x"}]"#,
            r#"[{"a":"\u12"}]"#, r#"[{"a":"\u12G4"}]"#, "[{\"a\":\"\t\"}]", "[{\"a\":\"\u{7f}é\"}]", r#"[{"a":tru}]"#,
            r#"[{"a":true,}]"#, r#"[{"a" 1}]"#, r#"[{1:1}]"#, r#"[{"a":[1,]}]"#, r#"[{"a":{"b"}}]"#, r#"[{"a":{,}}]"#,
            "\u{feff}[{}]", r#"[{"data":"\"quoted\" \\ \/ \b\f\n\r\t"}]"#, r#"[{"eventType":"a\u0000b"}]"#,
        ]
        .iter()
        .map(|s| s.to_string())
        .chain([deep(1), deep(127), deep(128), deep(129), deep(5000)])
        .collect();
        for c in &cases {
            agree(c.as_bytes());
        }
        // What the agreement above means, spelled out for a few.
        assert!(items(deep(5000).as_bytes()).is_some(), "no depth limit inside values");
        assert!(items(br#"[{"a":"\ud800"}]"#).is_some(), "lone surrogates pass in skipped values");
        assert!(items(br#"[{"\ud800":1}]"#).is_none(), "keys are decoded");
        assert!(items(b"[]").is_none() && items(b"[{},]").is_none() && items(br#"[{"a":01}]"#).is_none());
        let got = items(br#" [{"Data" : {"x":[1, "]"]} , "EVENTTYPE":"t\u0041", "data":"s"}, {}] "#).unwrap();
        assert_eq!(
            got[0],
            RawItem { data: Some(br#""s""#), event_type: Some(br#""t\u0041""#), ..RawItem::default() }
        );
        assert_eq!(string_of(got[0].event_type.unwrap()).as_deref(), Some("tA"));
        assert_eq!(got[1], RawItem::default());
        // Not UTF-8, inside a string and outside.
        agree(b"[{\"a\":\"\xff\"}]");
        for bad in [&b"\xc0\x80"[..], b"\xed\xa0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80", b"\xe2\x82\xac\xac"]
        {
            let body = [&b"[{\"data\":\"a"[..], bad, b"\"}]"].concat();
            agree(&body);
            assert!(items(&body).is_none());
        }
        agree("[{\"data\":\"\u{20ac}\u{1F600}\u{e9}x\"}]".as_bytes());
        agree(b"[{\"a\":1}]\xc3");
    }

    /// JSON text of `v` with whitespace placed by `ws` (a seed).
    fn render(v: &serde_json::Value, ws: u64) -> String {
        let mut out = if ws % 3 == 0 { serde_json::to_string_pretty(v) } else { serde_json::to_string(v) }
            .unwrap_or_default();
        if ws % 5 == 1 {
            out = format!(" \r\n\t{out}\n ");
        }
        out
    }

    fn json_value() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            "\\PC{0,12}".prop_map(Value::String),
            "[\\x00-\\x1f\"\\\\/a-z\u{e9}\u{1F600}]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::vec(("[a-zA-Z]{0,9}|eventId|EVENTTYPE|data|Metadata", inner), 0..4)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    fn batch() -> impl Strategy<Value = serde_json::Value> {
        use serde_json::Value;
        let key = "eventId|eventType|data|metadata|DATA|EventId|[a-z]{1,5}";
        prop::collection::vec(
            prop::collection::vec((key, json_value()), 0..5)
                .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            0..4,
        )
        .prop_map(Value::Array)
    }

    /// Bytes that make or break JSON when put anywhere.
    const SPICE: &[u8] = b",:[]{}\"\\ 0159eE+-.tfnu\x01\x1f\x7f\xc3\xa9\xff/";

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

        #[test]
        fn agrees_with_serde_json_on_valid_batches(v in batch(), ws in any::<u64>()) {
            let body = render(&v, ws);
            agree(body.as_bytes());
        }

        #[test]
        fn agrees_with_serde_json_on_mutated_batches(
            v in batch(),
            ws in any::<u64>(),
            edits in prop::collection::vec((any::<prop::sample::Index>(), 0..4u8, 0..SPICE.len()), 1..4),
        ) {
            let mut body = render(&v, ws).into_bytes();
            for (at, kind, spice) in edits {
                let i = if body.is_empty() { 0 } else { at.index(body.len()) };
                match kind {
                    0 if !body.is_empty() => { body.remove(i); }
                    1 => body.insert(i, SPICE[spice]),
                    2 if !body.is_empty() => body[i] = SPICE[spice],
                    _ => body.truncate(i),
                }
            }
            agree(&body);
        }

    }
}
