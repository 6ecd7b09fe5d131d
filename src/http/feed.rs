//! Atom feeds and entries, in JSON (`application/vnd.eventstore.atom+json` and every other JSON
//! type) and XML (`application/atom+xml`), with the `embed` levels
//! (none, `content`, `rich`, `body`, `pretty`, `tryharder`), shaped as v5 shapes them.
//!
//! Field order follows v5 (rich fields before the Atom base fields) and null fields are left
//! out. Entries are newest first in every feed.

use std::borrow::Cow;

use serde_json::{json, Map, Value};

use super::text::{event_uri, event_uri_into, iso8601, json_to_xml, xml_escape, MIN_TIME};
use crate::store::{RecordedEvent, ResolvedEvent};

/// Atom author of every feed and entry.
pub const AUTHOR: &str = "EventStore";
/// The event type of links.
pub const LINK_TYPE: &str = "$>";

/// How much of each event an entry embeds (`?embed=`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Embed {
    /// Atom fields only.
    None,
    /// Plus `content` for JSON events.
    Content,
    /// Plus the event's fields.
    Rich,
    /// Plus data and metadata as strings.
    Body,
    /// As Body, JSON objects re-indented.
    PrettyBody,
    /// As PrettyBody, also trying non-JSON data as JSON.
    TryHarder,
}

impl Embed {
    /// Parses `?embed=` (case-insensitive; anything unknown is `None`).
    pub fn parse(v: Option<&str>) -> Embed {
        match v.map(str::to_ascii_lowercase).as_deref() {
            Some("content") => Embed::Content,
            Some("rich") => Embed::Rich,
            Some("body") => Embed::Body,
            Some("pretty") | Some("prettybody") => Embed::PrettyBody,
            Some("tryharder") => Embed::TryHarder,
            _ => Embed::None,
        }
    }
}

/// A feed link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Absolute URL.
    pub uri: String,
    /// Relation.
    pub relation: &'static str,
}

/// A feed ready to be written.
#[derive(Clone, Debug)]
pub struct Feed {
    /// `title`.
    pub title: String,
    /// `id`.
    pub id: String,
    /// Time of `updated` (µs), `None` for an empty page.
    pub updated_us: Option<i64>,
    /// `streamId` (absent for `$all`).
    pub stream_id: Option<String>,
    /// `headOfStream`.
    pub head_of_stream: bool,
    /// `selfUrl` (backward stream pages).
    pub self_url: Option<String>,
    /// `eTag` (head pages).
    pub etag: Option<String>,
    /// Paging links.
    pub links: Vec<Link>,
    /// Entries, newest first.
    pub entries: Vec<ResolvedEvent>,
    /// Whether links were to be resolved (a link still unresolved lost its target).
    pub resolve: bool,
}

/// What an entry shows of an event.
struct View<'a> {
    stream: Cow<'a, str>,
    number: i64,
    summary: &'a str,
    updated_us: i64,
    rich: Option<&'a RecordedEvent>,
    link: Option<&'a RecordedEvent>,
}

fn view(ev: &ResolvedEvent, resolve: bool) -> View<'_> {
    if let Some(link) = &ev.link {
        return View {
            stream: Cow::Borrowed(&ev.event.stream),
            number: ev.event.event_number,
            summary: LINK_TYPE,
            updated_us: link.timestamp_us,
            rich: Some(&ev.event),
            link: Some(link),
        };
    }
    let e = &ev.event;
    if resolve && e.event_type == LINK_TYPE {
        // The target is gone: the entry names it but embeds nothing.
        let target = std::str::from_utf8(&e.data).ok().and_then(|s| {
            let (n, s) = s.split_once('@')?;
            Some((s.to_owned(), n.parse::<i64>().ok()?))
        });
        let (stream, number) = target.unwrap_or_else(|| (e.stream.clone(), e.event_number));
        return View {
            stream: Cow::Owned(stream),
            number,
            summary: LINK_TYPE,
            updated_us: e.timestamp_us,
            rich: None,
            link: None,
        };
    }
    View {
        stream: Cow::Borrowed(&e.stream),
        number: e.event_number,
        summary: &e.event_type,
        updated_us: e.timestamp_us,
        rich: Some(e),
        link: None,
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Re-indents `b` when it is a JSON object.
fn pretty(b: &[u8]) -> Option<String> {
    match serde_json::from_slice::<Value>(b) {
        Ok(v @ Value::Object(_)) => serde_json::to_string_pretty(&v).ok(),
        _ => None,
    }
}

/// Data or metadata as a JSON value: parsed when it is JSON, else a string.
pub fn value_of(b: &[u8], is_json: bool) -> Value {
    if is_json {
        if let Ok(v) = serde_json::from_slice::<Value>(b) {
            return v;
        }
    }
    Value::String(text(b))
}

/// The `content` object (and `application/vnd.eventstore.event+json` body) of an event.
pub fn content(e: &RecordedEvent) -> Value {
    let metadata = match (e.is_json, serde_json::from_slice::<Value>(&e.metadata)) {
        (true, Ok(v)) => v,
        _ => Value::String(text(&e.metadata)),
    };
    json!({
        "eventStreamId": e.stream,
        "eventNumber": e.event_number,
        "eventType": e.event_type,
        "eventId": uuid::Uuid::from_bytes(e.id).to_string(),
        "data": value_of(&e.data, e.is_json),
        "metadata": metadata,
    })
}

fn rich_fields(m: &mut Map<String, Value>, e: &RecordedEvent, link: Option<&RecordedEvent>, embed: Embed) {
    let body = embed >= Embed::Body;
    let nice =
        |b: &[u8]| if embed >= Embed::PrettyBody { pretty(b).unwrap_or_else(|| text(b)) } else { text(b) };
    let mut is_json = e.is_json;
    m.insert("eventId".into(), json!(uuid::Uuid::from_bytes(e.id).to_string()));
    m.insert("eventType".into(), json!(e.event_type));
    m.insert("eventNumber".into(), json!(e.event_number));
    if body {
        if e.is_json {
            m.insert("data".into(), json!(nice(&e.data)));
        } else if embed == Embed::TryHarder {
            match pretty(&e.data) {
                Some(p) => {
                    is_json = true;
                    m.insert("data".into(), json!(p));
                }
                None => {
                    m.insert("data".into(), json!(text(&e.data)));
                }
            }
        }
        if !e.metadata.is_empty() {
            m.insert("metaData".into(), json!(nice(&e.metadata)));
        }
        if let Some(l) = link {
            m.insert("linkMetaData".into(), json!(nice(&l.metadata)));
        }
    }
    m.insert("streamId".into(), json!(e.stream));
    m.insert("isJson".into(), json!(is_json));
    m.insert("isMetaData".into(), json!(body && !e.metadata.is_empty()));
    m.insert("isLinkMetaData".into(), json!(body && link.is_some_and(|l| !l.metadata.is_empty())));
    // Only on redacted events, so every other entry keeps v5's exact field set.
    if e.is_redacted {
        m.insert("isRedacted".into(), json!(true));
    }
    let pos = link.unwrap_or(e);
    m.insert("positionEventNumber".into(), json!(pos.event_number));
    m.insert("positionStreamId".into(), json!(pos.stream));
}

/// Links as a JSON array of `{uri, relation}`.
pub fn links_json(links: &[Link]) -> Value {
    Value::Array(links.iter().map(|l| json!({"uri": l.uri, "relation": l.relation})).collect())
}

/// An entry. `single` marks a single-event read, which carries `content` for JSON events at
/// every embed level.
pub fn entry_json(ev: &ResolvedEvent, base: &str, embed: Embed, resolve: bool, single: bool) -> Value {
    let v = view(ev, resolve);
    let mut m = Map::new();
    if embed >= Embed::Rich {
        if let Some(e) = v.rich {
            rich_fields(&mut m, e, v.link, embed);
        }
    }
    let id = event_uri(base, &v.stream, v.number);
    m.insert("title".into(), json!(format!("{}@{}", v.number, v.stream)));
    m.insert("id".into(), json!(id));
    m.insert("updated".into(), json!(iso8601(v.updated_us)));
    m.insert("author".into(), json!({"name": AUTHOR}));
    m.insert("summary".into(), json!(v.summary));
    let content_of =
        v.rich.filter(|e| e.is_json && (single || (embed == Embed::Content && v.link.is_none())));
    if let Some(e) = content_of {
        m.insert("content".into(), content(e));
    }
    m.insert(
        "links".into(),
        links_json(&[Link { uri: id.clone(), relation: "edit" }, Link { uri: id, relation: "alternate" }]),
    );
    Value::Object(m)
}

/// A feed as JSON.
pub fn feed_json(f: &Feed, base: &str, embed: Embed) -> Value {
    let mut m = Map::new();
    m.insert("title".into(), json!(f.title));
    m.insert("id".into(), json!(f.id));
    m.insert("updated".into(), json!(f.updated_us.map(iso8601).unwrap_or_else(|| MIN_TIME.into())));
    if let Some(s) = &f.stream_id {
        m.insert("streamId".into(), json!(s));
    }
    m.insert("author".into(), json!({"name": AUTHOR}));
    m.insert("headOfStream".into(), json!(f.head_of_stream));
    if let Some(s) = &f.self_url {
        m.insert("selfUrl".into(), json!(s));
    }
    if let Some(e) = &f.etag {
        m.insert("eTag".into(), json!(e));
    }
    m.insert("links".into(), links_json(&f.links));
    let entries = f.entries.iter().map(|e| entry_json(e, base, embed, f.resolve, false)).collect();
    m.insert("entries".into(), Value::Array(entries));
    Value::Object(m)
}

fn entry_xml_body(
    ev: &ResolvedEvent,
    base: &str,
    resolve: bool,
    content_of: Option<&RecordedEvent>,
    extra: &[Link],
    out: &mut String,
) {
    let v = view(ev, resolve);
    let id = event_uri(base, &v.stream, v.number);
    out.push_str(&format!(
        "<title>{}</title><id>{}</id><updated>{}</updated><author><name>{AUTHOR}</name></author><summary>{}</summary>",
        xml_escape(&format!("{}@{}", v.number, v.stream)),
        xml_escape(&id),
        iso8601(v.updated_us),
        xml_escape(v.summary)
    ));
    if let Some(e) = content_of {
        out.push_str("<content type=\"application/xml\">");
        json_to_xml("event", &content(e), out);
        out.push_str("</content>");
    }
    for rel in ["edit", "alternate"] {
        out.push_str(&format!("<link href=\"{}\" rel=\"{rel}\" />", xml_escape(&id)));
    }
    for l in extra {
        out.push_str(&format!("<link href=\"{}\" rel=\"{}\" />", xml_escape(&l.uri), l.relation));
    }
}

/// A feed as Atom XML.
pub fn feed_xml(f: &Feed, base: &str, embed: Embed) -> String {
    feed_xml_with(f, base, embed, &[])
}

/// A feed as Atom XML, entry `i` with the links `extra[i]` after its own (competing feeds'
/// `ack` and `nack`).
pub fn feed_xml_with(f: &Feed, base: &str, embed: Embed, extra: &[Vec<Link>]) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><feed xmlns=\"http://www.w3.org/2005/Atom\">",
    );
    out.push_str(&format!(
        "<title>{}</title><id>{}</id><updated>{}</updated><author><name>{AUTHOR}</name></author>",
        xml_escape(&f.title),
        xml_escape(&f.id),
        f.updated_us.map(iso8601).unwrap_or_else(|| MIN_TIME.into())
    ));
    for l in &f.links {
        out.push_str(&format!("<link href=\"{}\" rel=\"{}\" />", xml_escape(&l.uri), l.relation));
    }
    for (i, e) in f.entries.iter().enumerate() {
        out.push_str("<entry>");
        let content_of = (embed == Embed::Content
            && e.link.is_none()
            && e.event.is_json
            && e.event.event_type != LINK_TYPE)
            .then_some(&e.event);
        entry_xml_body(e, base, f.resolve, content_of, extra.get(i).map_or(&[][..], Vec::as_slice), &mut out);
        out.push_str("</entry>");
    }
    out.push_str("</feed>");
    out
}

/// A single event as an Atom XML entry (`<atom:entry>` with the event in `content`).
pub fn entry_xml(ev: &ResolvedEvent, base: &str, resolve: bool) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" encoding=\"utf-8\"?><entry xmlns=\"http://www.w3.org/2005/Atom\">",
    );
    let content_of = (ev.event.event_type != LINK_TYPE || ev.link.is_some()).then_some(&ev.event);
    entry_xml_body(ev, base, resolve, content_of, &[], &mut out);
    out.push_str("</entry>");
    out
}

/// A feed or entry JSON document wrapped in a minimal HTML page (the `text/html` type).
pub fn html(title: &str, doc: &Value) -> String {
    format!(
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>{}</title></head><body><pre>{}</pre></body></html>",
        xml_escape(title),
        xml_escape(&serde_json::to_string_pretty(doc).unwrap_or_default())
    )
}

// ---------------------------------------------------------------------------------------------
// The JSON feed written directly (the hot path of every feed read): the same document, byte for
// byte, as `serde_json::to_vec_pretty(&feed_json(..))`, without building a `Value` per field
// (each of which costs an allocation and an ordered-map insert) or copying event bodies.

/// The fields of one entry, in v5's order (see [`EntryDoc`]).
struct EntryOut<'a> {
    event_id: Option<[u8; 16]>,
    event_type: Option<&'a str>,
    event_number: Option<i64>,
    data: Option<Text<'a>>,
    meta_data: Option<Text<'a>>,
    link_meta_data: Option<Text<'a>>,
    stream_id: Option<&'a str>,
    is_json: Option<bool>,
    is_meta_data: Option<bool>,
    is_link_meta_data: Option<bool>,
    position_event_number: Option<i64>,
    position_stream_id: Option<&'a str>,
    /// `Some(true)` on a redacted event only (other entries keep v5's exact field set).
    is_redacted: Option<bool>,
    /// The stream and number the entry names (`title` is `number@stream`; `id` and the links
    /// are the event's URI).
    stream: Cow<'a, str>,
    number: i64,
    updated_us: i64,
    summary: &'a str,
    content: Option<Value>,
}

/// A body as the `Body` levels show it: the stored bytes (written as UTF-8 text, lossily when they
/// are not UTF-8; the check happens while escaping) or text the server made (re-indented JSON).
enum Text<'a> {
    Stored(&'a [u8]),
    Made(String),
}

fn nice_text(b: &[u8], embed: Embed) -> Text<'_> {
    match (embed >= Embed::PrettyBody).then(|| pretty(b)).flatten() {
        Some(p) => Text::Made(p),
        None => Text::Stored(b),
    }
}

/// The last timestamp formatted: the events of one commit share theirs.
#[derive(Default)]
struct LastStamp(Option<(i64, String)>);

impl LastStamp {
    fn format(&mut self, us: i64) -> &str {
        if self.0.as_ref().is_none_or(|(at, _)| *at != us) {
            self.0 = Some((us, iso8601(us)));
        }
        self.0.as_ref().map_or("", |(_, text)| text)
    }
}

/// One entry of a feed, as [`entry_json`] with `single = false` builds it.
fn entry_out(ev: &ResolvedEvent, embed: Embed, resolve: bool) -> EntryOut<'_> {
    let v = view(ev, resolve);
    let mut out = EntryOut {
        event_id: None,
        event_type: None,
        event_number: None,
        data: None,
        meta_data: None,
        link_meta_data: None,
        stream_id: None,
        is_json: None,
        is_meta_data: None,
        is_link_meta_data: None,
        position_event_number: None,
        position_stream_id: None,
        is_redacted: None,
        stream: v.stream,
        number: v.number,
        updated_us: v.updated_us,
        summary: v.summary,
        content: None,
    };
    if embed >= Embed::Rich {
        if let Some(e) = v.rich {
            let link = v.link;
            let body = embed >= Embed::Body;
            let mut is_json = e.is_json;
            out.event_id = Some(e.id);
            out.event_type = Some(&e.event_type);
            out.event_number = Some(e.event_number);
            if body {
                if e.is_json {
                    out.data = Some(nice_text(&e.data, embed));
                } else if embed == Embed::TryHarder {
                    match pretty(&e.data) {
                        Some(p) => {
                            is_json = true;
                            out.data = Some(Text::Made(p));
                        }
                        None => out.data = Some(Text::Stored(&e.data)),
                    }
                }
                if !e.metadata.is_empty() {
                    out.meta_data = Some(nice_text(&e.metadata, embed));
                }
                if let Some(l) = link {
                    out.link_meta_data = Some(nice_text(&l.metadata, embed));
                }
            }
            out.stream_id = Some(&e.stream);
            out.is_json = Some(is_json);
            out.is_meta_data = Some(body && !e.metadata.is_empty());
            out.is_link_meta_data = Some(body && link.is_some_and(|l| !l.metadata.is_empty()));
            let pos = link.unwrap_or(e);
            out.position_event_number = Some(pos.event_number);
            out.position_stream_id = Some(&pos.stream);
            out.is_redacted = e.is_redacted.then_some(true);
        }
    }
    if let Some(e) = v.rich.filter(|e| e.is_json && embed == Embed::Content && v.link.is_none()) {
        out.content = Some(content(e));
    }
    out
}

/// Appends `v` as a JSON string that needs no escapes: a UUID or a formatted timestamp (hex digits,
/// digits, `-`, `:`, `.`, `T`, `Z`).
fn plain_str(out: &mut Vec<u8>, v: &str) {
    debug_assert!(v.bytes().all(|b| b.is_ascii_alphanumeric() || b"-:.".contains(&b)), "{v}");
    out.push(b'"');
    out.extend_from_slice(v.as_bytes());
    out.push(b'"');
}

/// Appends the decimal form of `v`.
fn push_int(out: &mut Vec<u8>, v: i64) {
    if v < 0 {
        out.push(b'-');
    }
    super::text::push_decimal(out, v.unsigned_abs());
}

/// A pretty-printed JSON writer producing exactly serde_json's `to_vec_pretty` layout (two
/// spaces per level, `"key": value`, `[]`/`{}` when empty) for the fixed shape of a feed.
struct Pretty {
    out: Vec<u8>,
    /// The current entry's URI (written three times).
    uri: String,
    stamps: LastStamp,
}

/// A comma, a newline and indentation: `SEPARATOR[1..2 + n]` starts a line at `n` spaces,
/// `SEPARATOR[..2 + n]` also ends the previous member.
const SEPARATOR: &[u8; 2 + 32] = b",\n                                ";

impl Pretty {
    fn new(out: Vec<u8>) -> Pretty {
        Pretty { out, uri: String::new(), stamps: LastStamp::default() }
    }

    /// Starts field `key` of an object whose fields sit at `indent` spaces.
    /// Keys are fixed identifiers of the feed's shape, so they need no escaping.
    fn key(&mut self, indent: usize, first: &mut bool, key: &str) {
        debug_assert!(key.bytes().all(|b| b.is_ascii_alphanumeric()), "{key}");
        let from = usize::from(std::mem::replace(first, false));
        match SEPARATOR.get(from..2 + indent) {
            Some(sep) => self.out.extend_from_slice(sep),
            None => {
                self.out.extend_from_slice(&SEPARATOR[from..2]);
                self.spaces(indent);
            }
        }
        self.out.reserve(key.len() + 4);
        self.out.push(b'"');
        self.out.extend_from_slice(key.as_bytes());
        self.out.extend_from_slice(b"\": ");
    }

    /// `n` spaces of indentation.
    fn spaces(&mut self, mut n: usize) {
        const SPACES: &[u8; 32] = b"                                ";
        while n > 0 {
            let k = n.min(SPACES.len());
            self.out.extend_from_slice(&SPACES[..k]);
            n -= k;
        }
    }

    /// Closes an object or array whose members sat at `indent` spaces.
    fn close(&mut self, indent: usize, empty: bool, bracket: u8) {
        if !empty {
            self.out.push(b'\n');
            self.spaces(indent - 2);
        }
        self.out.push(bracket);
    }

    fn str_field(&mut self, indent: usize, first: &mut bool, key: &str, v: &str) {
        self.key(indent, first, key);
        self.string(v);
    }

    /// A string field whose value needs no escapes (see [`plain_str`]).
    fn plain_str_field(&mut self, indent: usize, first: &mut bool, key: &str, v: &str) {
        self.key(indent, first, key);
        plain_str(&mut self.out, v);
    }

    fn raw_field(&mut self, indent: usize, first: &mut bool, key: &str, v: &[u8]) {
        self.key(indent, first, key);
        self.out.extend_from_slice(v);
    }

    fn int_field(&mut self, indent: usize, first: &mut bool, key: &str, v: i64) {
        self.key(indent, first, key);
        push_int(&mut self.out, v);
    }

    fn bool_field(&mut self, indent: usize, first: &mut bool, key: &str, v: bool) {
        self.raw_field(indent, first, key, if v { b"true" } else { b"false" });
    }

    /// `{"name": "EventStore"}` as a field.
    fn author(&mut self, indent: usize, first: &mut bool) {
        self.key(indent, first, "author");
        self.out.push(b'{');
        let mut f = true;
        self.str_field(indent + 2, &mut f, "name", AUTHOR);
        self.close(indent + 2, false, b'}');
    }

    /// A `links` array of `{uri, relation}` objects as a field.
    fn links<'a>(
        &mut self,
        indent: usize,
        first: &mut bool,
        links: impl Iterator<Item = (&'a str, &'a str)>,
    ) {
        self.key(indent, first, "links");
        self.out.push(b'[');
        let mut empty = true;
        for (uri, relation) in links {
            if !std::mem::replace(&mut empty, false) {
                self.out.push(b',');
            }
            self.out.push(b'\n');
            self.spaces(indent + 2);
            self.out.push(b'{');
            let mut f = true;
            self.str_field(indent + 4, &mut f, "uri", uri);
            self.str_field(indent + 4, &mut f, "relation", relation);
            self.close(indent + 4, false, b'}');
        }
        self.close(indent + 2, empty, b']');
    }

    /// A JSON string with serde_json's escapes: `\"`, `\\`, `\b \t \n \f \r`, `\u00XX` for the
    /// other control characters; everything else as is. Eight bytes are tested at a time and runs
    /// without escapes are copied whole.
    fn string(&mut self, s: &str) {
        self.escaped(s.as_bytes(), false);
    }

    /// A stored body as a JSON string: its bytes when they are UTF-8, else the lossy decoding.
    fn text(&mut self, t: &Text<'_>) {
        match t {
            Text::Made(s) => self.string(s),
            Text::Stored(b) => {
                let mark = self.out.len();
                if !self.escaped(b, true) {
                    // Not ASCII: validate (borrowed when valid), then write again.
                    self.out.truncate(mark);
                    self.string(&String::from_utf8_lossy(b));
                }
            }
        }
    }

    /// Writes `b` (UTF-8, or with `ascii_only` any bytes) as a JSON string; with `ascii_only`,
    /// stops and returns false at the first byte that is not ASCII.
    fn escaped(&mut self, b: &[u8], ascii_only: bool) -> bool {
        self.out.reserve(b.len() + 2);
        self.out.push(b'"');
        let done = self.escaped_run(b, ascii_only);
        if done {
            self.out.push(b'"');
        }
        done
    }

    /// [`Pretty::escaped`] without the quotes.
    fn escaped_run(&mut self, b: &[u8], ascii_only: bool) -> bool {
        let mut start = 0;
        let mut at = 0;
        while at < b.len() {
            at += super::text::json_clean_run(&b[at..], ascii_only);
            let Some(&c) = b.get(at) else { break };
            if ascii_only && c >= 0x80 {
                return false;
            }
            let esc: &[u8] = match c {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                0x08 => b"\\b",
                0x09 => b"\\t",
                0x0a => b"\\n",
                0x0c => b"\\f",
                0x0d => b"\\r",
                0x00..=0x1f => {
                    self.out.extend_from_slice(&b[start..at]);
                    const HEX: &[u8; 16] = b"0123456789abcdef";
                    self.out.extend_from_slice(b"\\u00");
                    self.out.push(HEX[(c >> 4) as usize]);
                    self.out.push(HEX[(c & 15) as usize]);
                    at += 1;
                    start = at;
                    continue;
                }
                _ => {
                    at += 1;
                    continue;
                }
            };
            self.out.extend_from_slice(&b[start..at]);
            self.out.extend_from_slice(esc);
            at += 1;
            start = at;
        }
        self.out.extend_from_slice(&b[start..]);
        true
    }

    /// One entry (an element of `entries`, members at `indent`).
    fn entry(&mut self, indent: usize, base: &str, e: &EntryOut<'_>) {
        self.out.push(b'{');
        let f = &mut true;
        if let Some(x) = e.event_id {
            let mut buf = uuid::Uuid::encode_buffer();
            let id = uuid::Uuid::from_bytes(x).hyphenated().encode_lower(&mut buf);
            self.plain_str_field(indent, f, "eventId", id);
        }
        if let Some(x) = e.event_type {
            self.str_field(indent, f, "eventType", x);
        }
        if let Some(x) = e.event_number {
            self.int_field(indent, f, "eventNumber", x);
        }
        if let Some(x) = &e.data {
            self.key(indent, f, "data");
            self.text(x);
        }
        if let Some(x) = &e.meta_data {
            self.key(indent, f, "metaData");
            self.text(x);
        }
        if let Some(x) = &e.link_meta_data {
            self.key(indent, f, "linkMetaData");
            self.text(x);
        }
        if let Some(x) = e.stream_id {
            self.str_field(indent, f, "streamId", x);
        }
        if let Some(x) = e.is_json {
            self.bool_field(indent, f, "isJson", x);
        }
        if let Some(x) = e.is_meta_data {
            self.bool_field(indent, f, "isMetaData", x);
        }
        if let Some(x) = e.is_link_meta_data {
            self.bool_field(indent, f, "isLinkMetaData", x);
        }
        if let Some(x) = e.position_event_number {
            self.int_field(indent, f, "positionEventNumber", x);
        }
        if let Some(x) = e.position_stream_id {
            self.str_field(indent, f, "positionStreamId", x);
        }
        if let Some(x) = e.is_redacted {
            self.bool_field(indent, f, "isRedacted", x);
        }
        // `number@stream`: only the stream can need escapes.
        self.key(indent, f, "title");
        self.out.push(b'"');
        push_int(&mut self.out, e.number);
        self.out.push(b'@');
        self.escaped_run(e.stream.as_bytes(), false);
        self.out.push(b'"');
        let mut uri = std::mem::take(&mut self.uri);
        uri.clear();
        event_uri_into(&mut uri, base, &e.stream, e.number);
        self.str_field(indent, f, "id", &uri);
        self.key(indent, f, "updated");
        plain_str(&mut self.out, self.stamps.format(e.updated_us));
        self.author(indent, f);
        self.str_field(indent, f, "summary", e.summary);
        if let Some(c) = &e.content {
            // serde_json's own layout, shifted right to this depth (newlines in JSON text are
            // only ever layout: inside strings they are escaped).
            let doc = serde_json::to_vec_pretty(c).unwrap_or_default();
            let mut shifted = Vec::with_capacity(doc.len() + 64);
            for &c in &doc {
                shifted.push(c);
                if c == b'\n' {
                    shifted.resize(shifted.len() + indent, b' ');
                }
            }
            self.raw_field(indent, f, "content", &shifted);
        }
        self.links(indent, f, [(uri.as_str(), "edit"), (uri.as_str(), "alternate")].into_iter());
        self.uri = uri;
        self.close(indent, false, b'}');
    }
}

/// A feed as pretty-printed JSON bytes: exactly `serde_json::to_vec_pretty(&feed_json(f, base,
/// embed))`, written directly.
pub fn feed_json_bytes(f: &Feed, base: &str, embed: Embed) -> Vec<u8> {
    let bytes: usize = f.entries.iter().map(|e| e.event.data.len() + e.event.metadata.len() + 768).sum();
    let mut w = Pretty::new(Vec::with_capacity(1024 + bytes + bytes / 8));
    w.out.push(b'{');
    let first = &mut true;
    w.str_field(2, first, "title", &f.title);
    w.str_field(2, first, "id", &f.id);
    match f.updated_us {
        Some(us) => w.str_field(2, first, "updated", &iso8601(us)),
        None => w.str_field(2, first, "updated", MIN_TIME),
    }
    if let Some(s) = &f.stream_id {
        w.str_field(2, first, "streamId", s);
    }
    w.author(2, first);
    w.bool_field(2, first, "headOfStream", f.head_of_stream);
    if let Some(s) = &f.self_url {
        w.str_field(2, first, "selfUrl", s);
    }
    if let Some(s) = &f.etag {
        w.str_field(2, first, "eTag", s);
    }
    w.links(2, first, f.links.iter().map(|l| (l.uri.as_str(), l.relation)));
    w.key(2, first, "entries");
    w.out.push(b'[');
    for (i, e) in f.entries.iter().enumerate() {
        if i > 0 {
            w.out.push(b',');
        }
        w.out.extend_from_slice(b"\n    ");
        w.entry(6, base, &entry_out(e, embed, f.resolve));
    }
    w.close(4, f.entries.is_empty(), b']');
    w.close(2, false, b'}');
    w.out
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::Bytes;

    fn ev(stream: &str, n: i64, ty: &str, data: &[u8], meta: &[u8], is_json: bool) -> RecordedEvent {
        RecordedEvent {
            stream: stream.into(),
            event_number: n,
            id: [n as u8; 16],
            event_type: ty.into(),
            data: Bytes::copy_from_slice(data),
            metadata: Bytes::copy_from_slice(meta),
            is_json,
            is_redacted: false,
            timestamp_us: 1_700_000_000_123_450 + n,
            position: 1000 + n as u64,
        }
    }

    #[test]
    fn strings_escape_as_serde_json_does() {
        // Every escaped character at every offset of an 8-byte word, of the 16-byte and 64-byte
        // steps, among plain and non-ASCII text.
        let specials: Vec<char> =
            (0u8..0x20).map(char::from).chain(['"', '\\', '\u{7f}', 'é', '€']).collect();
        for len in (0..40).chain([63, 64, 65, 80, 127, 128, 129, 200]) {
            for at in 0..len.max(1) {
                for &c in &specials {
                    let mut s: String = "abcdefghijklmnopqrstuvwxyz".repeat(8).chars().take(len).collect();
                    if at < s.len() {
                        s.replace_range(at..at + 1, &c.to_string());
                    }
                    let mut w = Pretty::new(Vec::new());
                    w.string(&s);
                    assert_eq!(w.out, serde_json::to_vec(&s).unwrap(), "{s:?}");
                    // Stored bytes, also with a byte that is not UTF-8 at the same place.
                    let mut bad = s.clone().into_bytes();
                    for bytes in [s.as_bytes().to_vec(), {
                        bad.insert(at.min(bad.len()), 0xff);
                        bad.clone()
                    }] {
                        let mut w = Pretty::new(b"[".to_vec());
                        w.text(&Text::Stored(&bytes));
                        let want = serde_json::to_vec(&String::from_utf8_lossy(&bytes)).unwrap();
                        assert_eq!(&w.out[1..], want, "{bytes:?}");
                    }
                }
            }
        }
        for v in [0, 7, -1, 10, -10, 1234567890, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            push_int(&mut out, v);
            assert_eq!(out, v.to_string().into_bytes());
        }
    }

    #[test]
    fn direct_feed_json_is_the_value_document() {
        let plain = |e: RecordedEvent| ResolvedEvent { event: e, link: None };
        let entries = [
            plain(ev("s-1", 0, "a", br#"{"x": [1, 2], "q": "\"<&>\n\u00e9"}"#, b"", true)),
            plain(ev("s-1", 1, "b", br#"{"m":1}"#, br#"{"meta":"d"}"#, true)),
            plain(ev("s-1", 2, "c", b"not json \x01\t\xff", b"raw meta", false)),
            plain(ev("s-1", 3, "d", br#"{"try":"harder"}"#, b"", false)),
            plain(ev("s 1/x", 4, "e", b"[1,2,3]", b"", true)),
            plain(ev("s-1", 5, "$>", b"7@gone", b"", false)),
            ResolvedEvent {
                event: ev("target", 7, "t", br#"{"t":true}"#, b"", true),
                link: Some(ev("s-1", 6, "$>", b"7@target", br#"{"lm":1}"#, true)),
            },
            plain(ev("s-1", 8, "empty", b"", b"", true)),
            plain(ev("q\"uo\\te\u{1}é/%", 9, "t\"y", b"{}", b"", true)),
        ];
        for resolve in [false, true] {
            for n in [0, 1, entries.len()] {
                let f = Feed {
                    title: "Event stream 's-1'".into(),
                    id: "http://h:2113/streams/s-1".into(),
                    updated_us: (n > 0).then_some(1_700_000_000_000_000),
                    stream_id: (n != 1).then(|| "s-1".to_string()),
                    head_of_stream: n == 1,
                    self_url: (n == 0).then(|| "http://h:2113/streams/s-1".to_string()),
                    etag: (n == 0).then(|| "8;-2043752924".to_string()),
                    links: vec![
                        Link { uri: "http://h:2113/streams/s-1".into(), relation: "self" },
                        Link { uri: "http://h:2113/streams/s-1/head/backward/20".into(), relation: "first" },
                    ],
                    entries: entries[..n].to_vec(),
                    resolve,
                };
                for embed in [
                    Embed::None,
                    Embed::Content,
                    Embed::Rich,
                    Embed::Body,
                    Embed::PrettyBody,
                    Embed::TryHarder,
                ] {
                    let want = serde_json::to_vec_pretty(&feed_json(&f, "http://h:2113", embed)).unwrap();
                    let got = feed_json_bytes(&f, "http://h:2113", embed);
                    assert_eq!(
                        String::from_utf8_lossy(&got),
                        String::from_utf8_lossy(&want),
                        "embed {embed:?}, resolve {resolve}, {n} entries"
                    );
                }
            }
        }
    }
}
