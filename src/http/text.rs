//! Text helpers of the wire formats: timestamps as v5 writes them, RFC 3986 escaping of stream
//! ids in URLs, percent-decoding of paths, XML escaping, JSON→XML conversion and the scan for
//! the plain runs of JSON strings.

use serde_json::Value;

/// `0001-01-01T00:00:00Z`: the `updated` of an empty feed.
pub const MIN_TIME: &str = "0001-01-01T00:00:00Z";

fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// Appends the decimal digits of `n` (no allocation: bodies' lengths and event numbers are written
/// for every reply and feed entry).
pub fn push_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[at..]);
}

/// `secs` (Unix time) as an HTTP-date (IMF-fixdate, RFC 9110 §5.6.7), e.g.
/// `Sun, 06 Nov 1994 08:49:37 GMT`; years outside 0..=9999 are clamped.
pub fn http_date(secs: i64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] =
        [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, mo, d) = civil(days);
    let y = y.clamp(0, 9999) as u32;
    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(DAYS[days.rem_euclid(7) as usize]);
    let two = |out: &mut [u8; 29], at: usize, v: u32| {
        out[at] = b'0' + (v / 10 % 10) as u8;
        out[at + 1] = b'0' + (v % 10) as u8;
    };
    two(&mut out, 5, d);
    out[8..11].copy_from_slice(MONTHS[(mo - 1) as usize]);
    two(&mut out, 12, y / 100);
    two(&mut out, 14, y % 100);
    two(&mut out, 17, (sod / 3600) as u32);
    two(&mut out, 20, (sod / 60 % 60) as u32);
    two(&mut out, 23, (sod % 60) as u32);
    out
}

fn stamp(us: i64, zone: &str) -> String {
    let secs = us.div_euclid(1_000_000);
    let micros = us.rem_euclid(1_000_000);
    let (y, mo, d) = civil(secs.div_euclid(86_400));
    let sod = secs.rem_euclid(86_400);
    // Written digit by digit: feeds format one date per entry.
    let mut s = String::with_capacity(32);
    let two = |s: &mut String, v: u32| {
        s.push((b'0' + (v / 10 % 10) as u8) as char);
        s.push((b'0' + (v % 10) as u8) as char);
    };
    if (0..=9999).contains(&y) {
        two(&mut s, (y / 100) as u32);
        two(&mut s, (y % 100) as u32);
    } else {
        s.push_str(&format!("{y:04}"));
    }
    s.push('-');
    two(&mut s, mo);
    s.push('-');
    two(&mut s, d);
    s.push('T');
    two(&mut s, (sod / 3600) as u32);
    s.push(':');
    two(&mut s, (sod / 60 % 60) as u32);
    s.push(':');
    two(&mut s, (sod % 60) as u32);
    if micros != 0 {
        let mut digits = [0u8; 6];
        let mut m = micros as u32;
        for slot in digits.iter_mut().rev() {
            *slot = b'0' + (m % 10) as u8;
            m /= 10;
        }
        let keep = digits.iter().rposition(|&c| c != b'0').map_or(0, |i| i + 1);
        s.push('.');
        s.extend(digits[..keep].iter().map(|&c| c as char));
    }
    s.push_str(zone);
    s
}

/// Length of the leading run of `b` that a JSON string holds as it is: no `"`, `\\` or control
/// character (below 0x20), and with `ascii_only` nothing above 0x7f either. Feeds escape what
/// follows such a run; event batches validate it.
pub fn json_clean_run(b: &[u8], ascii_only: bool) -> usize {
    let mut at = 0;
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::*;
        // The lanes of `x` that stop a clean run, as set sign bits: `"`, `\\`, unsigned x <= 0x1f
        // and, with `ascii_only`, a set high bit. SSE2 is part of x86_64.
        let stops = |x: __m128i| {
            // SAFETY: SSE2 is enabled on every x86_64 target; these only compute on registers.
            unsafe {
                let quote = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'"' as i8));
                let backslash = _mm_cmpeq_epi8(x, _mm_set1_epi8(b'\\' as i8));
                let control = _mm_cmpeq_epi8(_mm_min_epu8(x, _mm_set1_epi8(0x1f)), x);
                let hit = _mm_or_si128(_mm_or_si128(quote, backslash), control);
                if ascii_only {
                    _mm_or_si128(hit, x)
                } else {
                    hit
                }
            }
        };
        let step16 = |at: usize| {
            let block = b.get(at..at + 16)?;
            // SAFETY: `block` is 16 readable bytes; unaligned loads have no alignment requirement.
            Some(unsafe { _mm_movemask_epi8(stops(_mm_loadu_si128(block.as_ptr().cast()))) } as u32)
        };
        // Short strings (keys, ids, types) mostly end in their first 16 bytes. Long clean runs
        // (event bodies) then go 64 bytes per step with one test per step; the step that holds
        // a stop is rescanned 16 bytes at a time.
        match step16(0) {
            Some(0) => at = 16,
            Some(hits) => return hits.trailing_zeros() as usize,
            None => {}
        }
        while let Some(block) = b.get(at..at + 64) {
            // SAFETY: `block` is 64 readable bytes; unaligned loads have no alignment requirement.
            let any = unsafe {
                let p: *const __m128i = block.as_ptr().cast();
                let v = _mm_or_si128(
                    _mm_or_si128(stops(_mm_loadu_si128(p)), stops(_mm_loadu_si128(p.add(1)))),
                    _mm_or_si128(stops(_mm_loadu_si128(p.add(2))), stops(_mm_loadu_si128(p.add(3)))),
                );
                _mm_movemask_epi8(v)
            };
            if any != 0 {
                break;
            }
            at += 64;
        }
        while let Some(hits) = step16(at) {
            if hits != 0 {
                return at + hits.trailing_zeros() as usize;
            }
            at += 16;
        }
    }
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let zero = |v: u64| v.wrapping_sub(ONES) & !v & HIGH;
    let high = if ascii_only { HIGH } else { 0 };
    while let Some(word) = b.get(at..at + 8) {
        let w = u64::from_le_bytes(word.try_into().unwrap_or([0; 8]));
        // Exact as a test (no false positives): SWAR zero-byte and less-than tests.
        let hits = zero(w ^ (ONES * b'"' as u64))
            | zero(w ^ (ONES * b'\\' as u64))
            | (w.wrapping_sub(ONES * 0x20) & !w & HIGH)
            | (w & high);
        if hits != 0 {
            break;
        }
        at += 8;
    }
    while let Some(&c) = b.get(at) {
        if c == b'"' || c == b'\\' || c < 0x20 || (ascii_only && c >= 0x80) {
            break;
        }
        at += 1;
    }
    at
}

#[cfg(test)]
#[test]
fn stamps_match_the_formatted_form() {
    let slow = |us: i64, zone: &str| {
        let secs = us.div_euclid(1_000_000);
        let micros = us.rem_euclid(1_000_000);
        let (y, mo, d) = civil(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400);
        let mut s = format!("{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}", sod / 3600, sod / 60 % 60, sod % 60);
        if micros != 0 {
            s.push('.');
            s.push_str(format!("{micros:06}").trim_end_matches('0'));
        }
        s.push_str(zone);
        s
    };
    for us in [
        0,
        1,
        10,
        123_450,
        999_999,
        1_700_000_000_123_456,
        -1,
        -62_135_596_800_000_000,
        253_402_300_799_999_999,
        i64::MAX / 4,
        i64::MIN / 4,
    ] {
        assert_eq!(stamp(us, "Z"), slow(us, "Z"), "{us}");
        assert_eq!(stamp(us, "+00:00"), slow(us, "+00:00"), "{us}");
    }
}

/// A UTC timestamp as v5 writes it: fractional digits without trailing zeros, then `Z`.
pub fn iso8601(us: i64) -> String {
    stamp(us, "Z")
}

/// As [`iso8601`] with an explicit `+00:00` offset (`dateLastUpdated` of users).
pub fn iso8601_offset(us: i64) -> String {
    stamp(us, "+00:00")
}

/// Escapes a stream id for a URL path segment (`Uri.EscapeDataString`: all but unreserved).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    escape_into(&mut out, s);
    out
}

/// The URI of event `number` of `stream`: `{base}/streams/{escaped stream}/{number}` (the
/// `Location` of an append, the `id` and links of a feed entry), built in one allocation.
pub fn event_uri(base: &str, stream: &str, number: i64) -> String {
    let mut out = String::with_capacity(base.len() + stream.len() + 32);
    event_uri_into(&mut out, base, stream, number);
    out
}

/// [`event_uri`], appended to `out`.
pub fn event_uri_into(out: &mut String, base: &str, stream: &str, number: i64) {
    use std::fmt::Write;
    out.push_str(base);
    out.push_str("/streams/");
    escape_into(out, stream);
    let _ = write!(out, "/{number}");
}

/// [`escape`], appended to `out`.
pub fn escape_into(out: &mut String, s: &str) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push('%');
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 15) as usize] as char);
        }
    }
}

/// Percent-decodes a path segment or query component (`+` is kept). `None` when the result is
/// not UTF-8.
pub fn unescape(s: &str, plus_is_space: bool) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        match b[i] {
            b'%' if i + 2 < b.len() => match (hex(b[i + 1]), hex(b[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' if plus_is_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

/// Escapes text for XML content and attribute values.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => {}
            c => out.push(c),
        }
    }
    out
}

fn xml_name(key: &str) -> String {
    let mut n: String = key
        .chars()
        .map(|c| if c.is_alphanumeric() || matches!(c, '_' | '-' | '.') { c } else { '_' })
        .collect();
    if n.is_empty() || !n.starts_with(|c: char| c.is_alphabetic() || c == '_') {
        n.insert(0, '_');
    }
    n
}

/// Writes `v` as XML element `name`: objects become child elements, arrays repeat the element.
pub fn json_to_xml(name: &str, v: &Value, out: &mut String) {
    let name = xml_name(name);
    match v {
        Value::Array(items) => {
            for item in items {
                json_to_xml(&name, item, out);
            }
        }
        Value::Object(map) => {
            out.push_str(&format!("<{name}>"));
            for (k, item) in map {
                json_to_xml(k, item, out);
            }
            out.push_str(&format!("</{name}>"));
        }
        Value::Null => out.push_str(&format!("<{name} />")),
        Value::String(s) => out.push_str(&format!("<{name}>{}</{name}>", xml_escape(s))),
        other => out.push_str(&format!("<{name}>{other}</{name}>")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        assert_eq!(iso8601(0), "1970-01-01T00:00:00Z");
        assert_eq!(iso8601(1_551_434_402_500_000), "2019-03-01T10:00:02.5Z");
        assert_eq!(iso8601(1_535_015_977_880_827), "2018-08-23T09:19:37.880827Z");
        assert_eq!(iso8601_offset(951_782_400_000_001), "2000-02-29T00:00:00.000001+00:00");
    }

    #[test]
    fn escaping() {
        assert_eq!(escape("$users"), "%24users");
        assert_eq!(escape("a@b c/d~"), "a%40b%20c%2Fd~");
        assert_eq!(event_uri("http://h:1/p", "a@b c/d~", 12), "http://h:1/p/streams/a%40b%20c%2Fd~/12");
        assert_eq!(event_uri("http://h", "$$s", -1), "http://h/streams/%24%24s/-1");
        assert_eq!(unescape("%24all", false).as_deref(), Some("$all"));
        assert_eq!(unescape("a%2", false).as_deref(), Some("a%2"));
        assert_eq!(unescape("a+b%2B", true).as_deref(), Some("a b+"));
        assert_eq!(unescape("%FF", false), None);
        let mut s = String::new();
        json_to_xml("data", &serde_json::json!({"a": [1, 2], "b c": "<x>"}), &mut s);
        assert_eq!(s, "<data><a>1</a><a>2</a><b_c>&lt;x&gt;</b_c></data>");
    }

    #[test]
    fn decimals() {
        let mut out = Vec::new();
        for n in [0, 7, 10, 1234, u64::MAX] {
            push_decimal(&mut out, n);
            out.push(b' ');
        }
        assert_eq!(out, b"0 7 10 1234 18446744073709551615 ");
    }

    #[test]
    fn http_dates() {
        assert_eq!(&http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&http_date(1_795_338_092), b"Sun, 22 Nov 2026 09:01:32 GMT");
        assert_eq!(&http_date(-1), b"Wed, 31 Dec 1969 23:59:59 GMT");
    }
}
