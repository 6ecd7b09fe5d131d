//! Atom feeds and entries, in JSON (`application/vnd.eventstore.atom+json` and every other JSON
//! type) and XML (`application/atom+xml`), with the `embed` levels
//! (`shared/reference/http-streams.md` §2.3–§2.7).
//!
//! Field order follows v5 (rich fields before the Atom base fields) and null fields are left
//! out. Entries are newest first in every feed.

use serde_json::{json, Map, Value};

use super::text::{escape, iso8601, json_to_xml, xml_escape, MIN_TIME};
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
    stream: String,
    number: i64,
    summary: &'a str,
    updated_us: i64,
    rich: Option<&'a RecordedEvent>,
    link: Option<&'a RecordedEvent>,
}

fn view(ev: &ResolvedEvent, resolve: bool) -> View<'_> {
    if let Some(link) = &ev.link {
        return View {
            stream: ev.event.stream.clone(),
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
            stream,
            number,
            summary: LINK_TYPE,
            updated_us: e.timestamp_us,
            rich: None,
            link: None,
        };
    }
    View {
        stream: e.stream.clone(),
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
    let pos = link.unwrap_or(e);
    m.insert("positionEventNumber".into(), json!(pos.event_number));
    m.insert("positionStreamId".into(), json!(pos.stream));
}

fn links_json(links: &[Link]) -> Value {
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
    let id = format!("{base}/streams/{}/{}", escape(&v.stream), v.number);
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
    out: &mut String,
) {
    let v = view(ev, resolve);
    let id = format!("{base}/streams/{}/{}", escape(&v.stream), v.number);
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
}

/// A feed as Atom XML.
pub fn feed_xml(f: &Feed, base: &str, embed: Embed) -> String {
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
    for e in &f.entries {
        out.push_str("<entry>");
        let content_of = (embed == Embed::Content
            && e.link.is_none()
            && e.event.is_json
            && e.event.event_type != LINK_TYPE)
            .then_some(&e.event);
        entry_xml_body(e, base, f.resolve, content_of, &mut out);
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
    entry_xml_body(ev, base, resolve, content_of, &mut out);
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
