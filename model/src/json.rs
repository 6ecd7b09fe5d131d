//! A minimal, strict JSON reader (RFC 8259), just enough to read stream metadata.
//!
//! The crate is std-only, so this replaces `serde_json`. It accepts exactly the JSON grammar:
//! UTF-8 input, one value surrounded by optional whitespace (space, tab, LF, CR), no trailing
//! commas, no comments, no leading `+` or leading zeros, no control characters inside strings,
//! and `\u` escapes whose surrogates are paired. Like `serde_json`'s default reader it refuses
//! more than 127 nested arrays/objects, which also bounds the recursion of this parser.
//!
//! Object members keep their source order and the byte spans of their key and value, so
//! callers can rebuild an object while copying members verbatim.

use std::ops::Range;

/// Deepest nesting of arrays and objects accepted (the same limit as `serde_json`).
const DEPTH_MAX: usize = 127;

/// A parsed JSON value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Value {
    /// `null`.
    Null,
    /// `true` or `false`.
    Bool(bool),
    /// A number, kept as its source text so integers of any size can be judged exactly.
    Number(String),
    /// A string with escapes decoded.
    String(String),
    /// An array.
    Array(Vec<Value>),
    /// An object, members in source order (duplicates kept).
    Object(Vec<Member>),
}

/// One `"key": value` member of an object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Member {
    /// The key with escapes decoded.
    pub key: String,
    /// The value.
    pub value: Value,
    /// Byte span of the key in the source, quotes included.
    pub key_span: Range<usize>,
    /// Byte span of the value in the source.
    pub value_span: Range<usize>,
}

impl Value {
    /// The value as an `i64`, if it is a number written without fraction or exponent that fits.
    pub(crate) fn as_integer(&self) -> Option<i64> {
        match self {
            Value::Number(text) if !text.contains(['.', 'e', 'E']) => text.parse().ok(),
            _ => None,
        }
    }
}

/// Parses a complete JSON document, or returns `None` if `bytes` is not exactly one valid value.
pub(crate) fn parse(bytes: &[u8]) -> Option<Value> {
    let text = std::str::from_utf8(bytes).ok()?;
    let mut parser = Parser { src: text.as_bytes(), pos: 0, depth: 0 };
    parser.whitespace();
    let value = parser.value()?;
    parser.whitespace();
    (parser.pos == parser.src.len()).then_some(value)
}

struct Parser<'a> {
    /// The source, known to be valid UTF-8.
    src: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.src.get(self.pos).copied()
    }

    fn next(&mut self) -> Option<u8> {
        let byte = self.peek()?;
        self.pos += 1;
        Some(byte)
    }

    fn expect(&mut self, byte: u8) -> Option<()> {
        (self.next()? == byte).then_some(())
    }

    fn whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.pos += 1;
        }
    }

    fn value(&mut self) -> Option<Value> {
        match self.peek()? {
            b'{' => self.nested(Self::object),
            b'[' => self.nested(Self::array),
            b'"' => self.string().map(Value::String),
            b't' => self.literal("true", Value::Bool(true)),
            b'f' => self.literal("false", Value::Bool(false)),
            b'n' => self.literal("null", Value::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => None,
        }
    }

    /// Runs `body` one nesting level deeper, refusing to go past `DEPTH_MAX`.
    fn nested(&mut self, body: fn(&mut Self) -> Option<Value>) -> Option<Value> {
        if self.depth == DEPTH_MAX {
            return None;
        }
        self.depth += 1;
        let value = body(self);
        self.depth -= 1;
        value
    }

    fn literal(&mut self, word: &str, value: Value) -> Option<Value> {
        let end = self.pos + word.len();
        (self.src.get(self.pos..end)? == word.as_bytes()).then(|| {
            self.pos = end;
            value
        })
    }

    fn object(&mut self) -> Option<Value> {
        self.expect(b'{')?;
        let mut members = Vec::new();
        self.whitespace();
        if self.peek()? == b'}' {
            self.pos += 1;
            return Some(Value::Object(members));
        }
        loop {
            self.whitespace();
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = key_start..self.pos;
            self.whitespace();
            self.expect(b':')?;
            self.whitespace();
            let value_start = self.pos;
            let value = self.value()?;
            members.push(Member { key, value, key_span, value_span: value_start..self.pos });
            self.whitespace();
            match self.next()? {
                b',' => continue,
                b'}' => return Some(Value::Object(members)),
                _ => return None,
            }
        }
    }

    fn array(&mut self) -> Option<Value> {
        self.expect(b'[')?;
        let mut items = Vec::new();
        self.whitespace();
        if self.peek()? == b']' {
            self.pos += 1;
            return Some(Value::Array(items));
        }
        loop {
            self.whitespace();
            items.push(self.value()?);
            self.whitespace();
            match self.next()? {
                b',' => continue,
                b']' => return Some(Value::Array(items)),
                _ => return None,
            }
        }
    }

    fn string(&mut self) -> Option<String> {
        self.expect(b'"')?;
        let mut out = Vec::new();
        loop {
            match self.next()? {
                b'"' => break,
                b'\\' => {
                    let decoded = match self.next()? {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    };
                    out.extend_from_slice(decoded.encode_utf8(&mut [0; 4]).as_bytes());
                }
                byte if byte < 0x20 => return None,
                // Multi-byte UTF-8 sequences are copied byte by byte; the source is valid UTF-8.
                byte => out.push(byte),
            }
        }
        String::from_utf8(out).ok()
    }

    /// Decodes the `XXXX` after `\u`, and the low half of a surrogate pair when needed.
    fn unicode_escape(&mut self) -> Option<char> {
        let first = self.hex4()?;
        match first {
            0xD800..=0xDBFF => {
                self.expect(b'\\')?;
                self.expect(b'u')?;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return None;
                }
                char::from_u32(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))
            }
            0xDC00..=0xDFFF => None,
            _ => char::from_u32(first),
        }
    }

    fn hex4(&mut self) -> Option<u32> {
        let mut code = 0;
        for _ in 0..4 {
            let digit = char::from(self.next()?).to_digit(16)?;
            code = code * 16 + digit;
        }
        Some(code)
    }

    fn number(&mut self) -> Option<Value> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.next()? {
            b'0' => {}
            b'1'..=b'9' => self.digits(),
            _ => return None,
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            self.some_digits()?;
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            self.some_digits()?;
        }
        let text = std::str::from_utf8(&self.src[start..self.pos]).ok()?;
        Some(Value::Number(text.to_owned()))
    }

    fn digits(&mut self) {
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.pos += 1;
        }
    }

    /// At least one digit.
    fn some_digits(&mut self) -> Option<()> {
        let start = self.pos;
        self.digits();
        (self.pos > start).then_some(())
    }
}

#[cfg(test)]
mod tests {
    use super::{parse, Value};

    fn ok(text: &str) -> Value {
        parse(text.as_bytes()).unwrap_or_else(|| panic!("should parse: {text}"))
    }

    #[test]
    fn accepts_every_kind_of_value() {
        assert_eq!(ok("null"), Value::Null);
        assert_eq!(ok(" true "), Value::Bool(true));
        assert_eq!(ok("false"), Value::Bool(false));
        assert_eq!(ok("-0"), Value::Number("-0".into()));
        assert_eq!(ok("12.5e-3"), Value::Number("12.5e-3".into()));
        assert_eq!(ok("[]"), Value::Array(vec![]));
        assert_eq!(ok("[1, [2, {}], \"x\"]").clone(), ok("[1,[2,{}],\"x\"]"));
        assert_eq!(ok("\"a\\\"\\\\\\/\\b\\f\\n\\r\\t\""), Value::String("a\"\\/\u{8}\u{c}\n\r\t".into()));
        assert_eq!(ok("\"\\u0024tb \\ud83d\\ude00 é\""), Value::String("$tb 😀 é".into()));
        let text = "{ \"a\" : {\"b\": [null]}, \"\\u0063\":1 }";
        let Value::Object(members) = ok(text) else { panic!() };
        assert_eq!(members.len(), 2);
        assert_eq!(members[0].key, "a");
        assert_eq!(&text[members[0].value_span.clone()], "{\"b\": [null]}");
        assert_eq!(members[1].key, "c");
        assert_eq!(&text[members[1].key_span.clone()], "\"\\u0063\"");
        assert_eq!(&text[members[1].value_span.clone()], "1");
    }

    #[test]
    fn rejects_malformed_documents() {
        for text in [
            "",
            " ",
            "{",
            "}",
            "[1,]",
            "{\"a\":1,}",
            "{\"a\" 1}",
            "{a:1}",
            "01",
            "1.",
            ".5",
            "+1",
            "1e",
            "-",
            "tru",
            "nul",
            "\"abc",
            "\"\\x\"",
            "\"\\u12\"",
            "\"\\ud800\"",
            "\"\\udc00\"",
            "\"\t\"",
            "1 2",
            "{} x",
            "[1 2]",
            "'a'",
            "NaN",
        ] {
            assert_eq!(parse(text.as_bytes()), None, "should reject {text:?}");
        }
        assert_eq!(parse(b"\"\xff\""), None, "invalid UTF-8");
    }

    #[test]
    fn bounds_nesting() {
        let deep_ok = "[".repeat(127) + &"]".repeat(127);
        assert!(parse(deep_ok.as_bytes()).is_some());
        let too_deep = "[".repeat(128) + &"]".repeat(128);
        assert!(parse(too_deep.as_bytes()).is_none());
    }

    #[test]
    fn integers_are_exact() {
        assert_eq!(ok("9223372036854775807").as_integer(), Some(i64::MAX));
        assert_eq!(ok("-9223372036854775808").as_integer(), Some(i64::MIN));
        assert_eq!(ok("9223372036854775808").as_integer(), None);
        assert_eq!(ok("1.0").as_integer(), None);
        assert_eq!(ok("1e2").as_integer(), None);
        assert_eq!(ok("-0").as_integer(), Some(0));
        assert_eq!(ok("\"1\"").as_integer(), None);
    }
}
