//! Media types and content negotiation, by v5's rules and with v5's media type lists per route.
//!
//! A route lists the media types it can produce, its default first. `?format=` beats `Accept`;
//! `Accept` entries are tried by descending `q`; `*/*` and `type/*` pick the route's first match.
//! Request bodies must name one of the route's types exactly (case-sensitive), with no charset or
//! a UTF-8 one. ETag suffixes are the .NET Framework 64-bit `String.GetHashCode` of the media type.

/// A media type the node reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Media {
    /// `application/vnd.eventstore.streamdesc+json`.
    StreamDesc,
    /// `application/atom+xml`.
    AtomXml,
    /// `application/vnd.eventstore.atom+json`.
    AtomJson,
    /// `text/xml`.
    TextXml,
    /// `application/xml`.
    AppXml,
    /// `application/json`.
    Json,
    /// `application/vnd.eventstore.event+xml`.
    EventXml,
    /// `application/vnd.eventstore.event+json`.
    EventJson,
    /// `application/vnd.eventstore.events+xml`.
    EventsXml,
    /// `application/vnd.eventstore.events+json`.
    EventsJson,
    /// `text/html`.
    Html,
    /// `application/octet-stream`.
    OctetStream,
    /// `text/plain`.
    TextPlain,
    /// `application/atomsvc+xml` (service documents; no route produces it).
    AtomSvcXml,
    /// `application/vnd.eventstore.atomsvc+json` (as above).
    AtomSvcJson,
    /// `application/vnd.eventstore.competingatom+json` (persistent subscription feeds).
    CompetingJson,
    /// `application/vnd.eventstore.competingatom+xml`.
    CompetingXml,
}

/// `mime()` and `content_type()` from one table: textual types' `Content-Type` carries
/// `charset=utf-8`, `application/octet-stream` none.
macro_rules! media_names {
    ($($v:ident => $m:literal,)*) => {
        /// The media type.
        pub fn mime(self) -> &'static str {
            match self {
                $(Media::$v => $m,)*
            }
        }

        /// The `Content-Type` value (textual types carry `charset=utf-8`); static, so replies
        /// need neither formatting nor header-value validation.
        #[allow(unreachable_patterns)]
        pub fn content_type(self) -> &'static str {
            match self {
                Media::OctetStream => "application/octet-stream",
                $(Media::$v => concat!($m, "; charset=utf-8"),)*
            }
        }
    };
}

impl Media {
    media_names! {
        StreamDesc => "application/vnd.eventstore.streamdesc+json",
        AtomXml => "application/atom+xml",
        AtomJson => "application/vnd.eventstore.atom+json",
        TextXml => "text/xml",
        AppXml => "application/xml",
        Json => "application/json",
        EventXml => "application/vnd.eventstore.event+xml",
        EventJson => "application/vnd.eventstore.event+json",
        EventsXml => "application/vnd.eventstore.events+xml",
        EventsJson => "application/vnd.eventstore.events+json",
        Html => "text/html",
        OctetStream => "application/octet-stream",
        TextPlain => "text/plain",
        AtomSvcXml => "application/atomsvc+xml",
        AtomSvcJson => "application/vnd.eventstore.atomsvc+json",
        CompetingJson => "application/vnd.eventstore.competingatom+json",
        CompetingXml => "application/vnd.eventstore.competingatom+xml",
    }

    /// Whether replies of this type are JSON documents.
    pub fn is_json(self) -> bool {
        matches!(
            self,
            Media::StreamDesc
                | Media::AtomJson
                | Media::Json
                | Media::EventJson
                | Media::EventsJson
                | Media::AtomSvcJson
                | Media::CompetingJson
        )
    }

    /// The ETag suffix of this type.
    pub fn etag_hash(self) -> i32 {
        dotnet_hash(self.mime())
    }
}

/// Feed routes, default first.
pub const FEED: &[Media] = &[
    Media::StreamDesc,
    Media::AtomXml,
    Media::AtomJson,
    Media::TextXml,
    Media::AppXml,
    Media::Json,
    Media::EventXml,
    Media::EventJson,
    Media::EventsXml,
    Media::EventsJson,
    Media::Html,
];
/// Single-event routes, default first.
pub const EVENT: &[Media] = &[
    Media::AtomXml,
    Media::AtomJson,
    Media::TextXml,
    Media::AppXml,
    Media::Json,
    Media::EventXml,
    Media::EventJson,
    Media::OctetStream,
    Media::Html,
];
/// Persistent subscription feeds (only the competing types, as v5).
pub const COMPETING: &[Media] = &[Media::CompetingJson, Media::CompetingXml];
/// Node information routes.
pub const DEFAULT: &[Media] = &[Media::Json, Media::TextXml, Media::AppXml, Media::TextPlain];
/// Users routes (replies and bodies).
pub const USERS: &[Media] = &[Media::Json, Media::TextXml];
/// Bodies of `POST /streams/{stream}` and `/metadata`.
pub const WRITE: &[Media] = &[
    Media::EventsJson,
    Media::EventsXml,
    Media::EventJson,
    Media::EventXml,
    Media::Json,
    Media::AppXml,
    Media::TextXml,
    Media::AtomXml,
    Media::AtomJson,
    Media::OctetStream,
];
/// Bodies of `POST /streams/{stream}/incoming/{guid}`.
pub const INCOMING: &[Media] = &[Media::AtomXml, Media::AtomJson, Media::TextXml, Media::AppXml, Media::Json];

const ALL: &[Media] = &[
    Media::StreamDesc,
    Media::AtomXml,
    Media::AtomJson,
    Media::TextXml,
    Media::AppXml,
    Media::Json,
    Media::EventXml,
    Media::EventJson,
    Media::EventsXml,
    Media::EventsJson,
    Media::Html,
    Media::OctetStream,
    Media::TextPlain,
    Media::AtomSvcXml,
    Media::AtomSvcJson,
    Media::CompetingJson,
    Media::CompetingXml,
];

/// How the response type was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    /// No `Accept` and no `format`: the route's default.
    Default,
    /// A wildcard range.
    Wildcard,
    /// Named explicitly.
    Explicit,
}

/// Why no response type could be chosen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NegotiationError {
    /// Nothing acceptable (406).
    NotAcceptable,
    /// An unknown `?format=` value (400).
    UnknownFormat(String),
}

/// Chooses the response type among `codecs` (the route's list, default first).
pub fn negotiate(
    accept: Option<&str>,
    format: Option<&str>,
    codecs: &[Media],
) -> Result<(Media, How), NegotiationError> {
    if let Some(f) = format {
        let m = match f.to_ascii_lowercase().as_str() {
            "json" => Media::Json,
            "text" => Media::TextPlain,
            "xml" => Media::TextXml,
            "atom" => Media::AtomXml,
            "atomxj" => Media::AtomJson,
            "atomsvc" => Media::AtomSvcXml,
            "atomsvcxj" => Media::AtomSvcJson,
            _ => return Err(NegotiationError::UnknownFormat(f.to_owned())),
        };
        return if codecs.contains(&m) {
            Ok((m, How::Explicit))
        } else {
            Err(NegotiationError::NotAcceptable)
        };
    }
    let Some(accept) = accept.filter(|a| !a.trim().is_empty()) else {
        return codecs.first().map(|m| (*m, How::Default)).ok_or(NegotiationError::NotAcceptable);
    };
    let mut ranges: Vec<(f32, usize, &str)> = Vec::new();
    for (i, part) in accept.split(',').enumerate() {
        let mut bits = part.split(';');
        let range = bits.next().unwrap_or("").trim();
        let q = bits
            .filter_map(|p| p.trim().strip_prefix("q="))
            .find_map(|v| v.trim().parse::<f32>().ok())
            .unwrap_or(1.0);
        if !range.is_empty() && q > 0.0 {
            ranges.push((q, i, range));
        }
    }
    ranges.sort_by(|a, b| b.0.partial_cmp(&a.0).unwrap_or(std::cmp::Ordering::Equal).then(a.1.cmp(&b.1)));
    for (_, _, range) in ranges {
        if range == "*/*" {
            if let Some(m) = codecs.first() {
                return Ok((*m, How::Wildcard));
            }
        } else if let Some(ty) = range.strip_suffix("/*") {
            if let Some(m) =
                codecs.iter().find(|m| m.mime().split('/').next().is_some_and(|t| t.eq_ignore_ascii_case(ty)))
            {
                return Ok((*m, How::Wildcard));
            }
        } else if let Some(m) = codecs.iter().find(|m| m.mime().eq_ignore_ascii_case(range)) {
            return Ok((*m, How::Explicit));
        }
    }
    Err(NegotiationError::NotAcceptable)
}

/// The media type of a request body, if it is one of `allowed`: the type must match exactly and a
/// `charset` parameter, if any, must be UTF-8.
pub fn request_media(content_type: Option<&str>, allowed: &[Media]) -> Option<Media> {
    let ct = content_type?;
    let mut parts = ct.split(';');
    let ty = parts.next()?.trim();
    for p in parts {
        if let Some((k, v)) = p.split_once('=') {
            if k.trim().eq_ignore_ascii_case("charset") {
                let v = v.trim().trim_matches('"');
                if !v.eq_ignore_ascii_case("utf-8") && !v.eq_ignore_ascii_case("utf8") {
                    return None;
                }
            }
        }
    }
    let m = ALL.iter().find(|m| m.mime() == ty)?;
    allowed.contains(m).then_some(*m)
}

/// .NET Framework (64-bit) `String.GetHashCode` of `s`.
pub fn dotnet_hash(s: &str) -> i32 {
    let units: Vec<u16> = s.encode_utf16().collect();
    let (mut h1, mut h2) = (5381i32, 5381i32);
    let mut pairs = units.chunks(2);
    for pair in &mut pairs {
        h1 = h1.wrapping_shl(5).wrapping_add(h1) ^ i32::from(pair[0]);
        if let Some(c) = pair.get(1) {
            h2 = h2.wrapping_shl(5).wrapping_add(h2) ^ i32::from(*c);
        }
    }
    h1.wrapping_add(h2.wrapping_mul(1_566_083_941))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etag_hashes_match_v5() {
        assert_eq!(Media::AtomJson.etag_hash(), -2060438500);
        assert_eq!(Media::Json.etag_hash(), 1391431453);
        assert_eq!(Media::AtomXml.etag_hash(), -1359611486);
        assert_eq!(Media::TextXml.etag_hash(), -650849973);
        assert_eq!(Media::AppXml.etag_hash(), 421361534);
        assert_eq!(Media::EventsJson.etag_hash(), 1646817468);
        assert_eq!(Media::EventJson.etag_hash(), 1580925873);
        assert_eq!(Media::StreamDesc.etag_hash(), 1415427280);
        assert_eq!(Media::Html.etag_hash(), 1268450035);
    }

    #[test]
    fn negotiation() {
        assert_eq!(negotiate(None, None, FEED), Ok((Media::StreamDesc, How::Default)));
        assert_eq!(negotiate(Some("*/*"), None, EVENT), Ok((Media::AtomXml, How::Wildcard)));
        assert_eq!(negotiate(Some("application/json"), None, FEED), Ok((Media::Json, How::Explicit)));
        assert_eq!(
            negotiate(Some("text/plain;q=0.5, application/vnd.eventstore.atom+json"), None, FEED),
            Ok((Media::AtomJson, How::Explicit))
        );
        assert_eq!(negotiate(Some("image/png"), None, FEED), Err(NegotiationError::NotAcceptable));
        assert_eq!(negotiate(Some("text/*"), None, FEED), Ok((Media::TextXml, How::Wildcard)));
        assert_eq!(negotiate(Some("image/png"), Some("json"), FEED), Ok((Media::Json, How::Explicit)));
        assert!(matches!(negotiate(None, Some("yaml"), FEED), Err(NegotiationError::UnknownFormat(_))));
        assert_eq!(request_media(Some("application/json; charset=utf-8"), WRITE), Some(Media::Json));
        assert_eq!(request_media(Some("Application/JSON"), WRITE), None);
        assert_eq!(request_media(Some("application/json; charset=latin1"), WRITE), None);
        assert_eq!(request_media(Some("application/vnd.eventstore.events+json"), INCOMING), None);
    }
}
