//! Streams over HTTP: appends in every body type, feeds and paging links, single events in every
//! type, embed levels, caching and ETags, long polling, deletes, `$all`, and bad input.

#[path = "http_support/mod.rs"]
mod support;

use serde_json::{json, Value};
use support::{new_id, start, ADMIN};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ATOM: (&str, &str) = ("accept", "application/vnd.eventstore.atom+json");
const EVENTS_JSON: &str = "application/vnd.eventstore.events+json";

fn uris(feed: &Value) -> Vec<(String, String)> {
    feed["links"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["relation"].as_str().unwrap().to_owned(),
                l["uri"].as_str().unwrap().replace("http://h:2113", ""),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_batch_and_read_head_feed() {
    let s = start().await;
    let body = json!([
        {"eventId": new_id(), "eventType": "created", "data": {"a": 1}, "metadata": {"who": "me"}},
        {"eventId": new_id(), "eventType": "text", "data": "plain text"},
    ]);
    let r = s.post("/streams/orders-1", EVENTS_JSON, &[], body.to_string().as_bytes()).await;
    assert_eq!((r.status, r.reason.as_str()), (201, "Created"));
    assert_eq!(r.header("location"), Some("http://h:2113/streams/orders-1/0"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert!(r.body.is_empty());

    let r = s.get("/streams/orders-1", &[ATOM]).await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/vnd.eventstore.atom+json; charset=utf-8"));
    assert_eq!(r.header("cache-control"), Some("max-age=0, no-cache, must-revalidate"));
    assert_eq!(r.header("etag"), Some("\"1;-2060438500\""));
    // A feed page of 1 KiB or more is gzipped for a client that accepts it: it varies on both.
    assert_eq!(r.header("vary"), Some("Accept, Accept-Encoding"));
    let feed = r.json();
    assert_eq!(feed["eTag"], "1;-2060438500");
    assert_feed_snapshot!("head_feed", &feed);

    // Every JSON type gets the same document; the ETag suffix follows the negotiated type.
    let r = s.get("/streams/orders-1", &[("accept", "application/json")]).await;
    assert_eq!(r.header("etag"), Some("\"1;1391431453\""));
    assert_eq!(r.json()["eTag"], "1;-2060438500");
    assert_eq!(r.json()["entries"], feed["entries"]);

    for embed in ["content", "rich", "body", "pretty", "tryharder"] {
        let r = s.get(&format!("/streams/orders-1?embed={embed}"), &[ATOM]).await;
        assert_feed_snapshot!(format!("embed_{embed}"), &r.json()["entries"]);
    }
    // Unknown embed values mean None.
    let r = s.get("/streams/orders-1?embed=bogus", &[ATOM]).await;
    assert_eq!(r.json()["entries"], feed["entries"]);

    let r = s.get("/streams/orders-1", &[("accept", "application/atom+xml")]).await;
    assert_eq!(r.header("content-type"), Some("application/atom+xml; charset=utf-8"));
    let xml = r.text();
    assert!(xml.contains("<feed xmlns=\"http://www.w3.org/2005/Atom\">"), "{xml}");
    assert!(xml.contains("<title>1@orders-1</title>") && xml.contains("rel=\"metadata\""), "{xml}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paging_links_follow_the_reference_formulas() {
    let s = start().await;
    s.append_n("p", 0, 25).await;
    let head = s.get("/streams/p", &[ATOM]).await.json();
    assert_eq!(
        uris(&head),
        [
            ("self", "/streams/p"),
            ("first", "/streams/p/head/backward/20"),
            ("last", "/streams/p/0/forward/20"),
            ("next", "/streams/p/4/backward/20"),
            ("previous", "/streams/p/25/forward/20"),
            ("metadata", "/streams/p/metadata"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    assert_eq!(head["entries"].as_array().unwrap().len(), 20);
    assert_eq!(head["entries"][0]["title"], "24@p");
    assert_eq!(head["headOfStream"], true);

    // The last backward page has neither `last` nor `next`, and is cacheable forever.
    let r = s.get("/streams/p/4/backward/20", &[ATOM]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=31536000, public"));
    assert_eq!(r.header("etag"), None);
    let page = r.json();
    assert_eq!(page["headOfStream"], false);
    assert_eq!(page.get("eTag"), None);
    let rels: Vec<String> = uris(&page).into_iter().map(|(r, _)| r).collect();
    assert_eq!(rels, ["self", "first", "previous", "metadata"]);
    assert_eq!(page["entries"].as_array().unwrap().len(), 5);

    // Forward pages: full pages are immutable, the partial one is a head page; entries newest first.
    let r = s.get("/streams/p/0/forward/20", &[ATOM]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=31536000, public"));
    let page = r.json();
    assert_eq!(page["entries"][0]["title"], "19@p");
    assert_eq!(page["headOfStream"], false);
    assert_eq!(page.get("selfUrl"), None);
    assert_eq!(
        uris(&page).into_iter().map(|(r, u)| format!("{r} {u}")).collect::<Vec<_>>(),
        [
            "self /streams/p",
            "first /streams/p/head/backward/20",
            "previous /streams/p/20/forward/20",
            "metadata /streams/p/metadata"
        ]
    );
    let r = s.get("/streams/p/20/forward/20", &[ATOM]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=0, no-cache, must-revalidate"));
    assert_eq!(r.header("etag"), Some("\"24;-2060438500\""));
    let page = r.json();
    assert_eq!(page["headOfStream"], true);
    assert_eq!(page["entries"].as_array().unwrap().len(), 5);
    assert!(uris(&page).contains(&("next".to_owned(), "/streams/p/19/backward/20".to_owned())));

    // Past the end: empty, no `previous`, minimum `updated`.
    let page = s.get("/streams/p/30/forward/20", &[("accept", "application/json")]).await.json();
    assert_eq!(page["entries"], json!([]));
    assert_eq!(page["updated"], "0001-01-01T00:00:00Z");
    assert!(!uris(&page).iter().any(|(r, _)| r == "previous"));

    // Backward from beyond the head: an empty page with head caching.
    let r = s.get("/streams/p/100/backward/20", &[ATOM]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=0, no-cache, must-revalidate"));
    assert_eq!(r.json()["entries"], json!([]));

    // Without a direction word a page reads backward.
    let page = s.get("/streams/p/10/5", &[ATOM]).await.json();
    let titles: Vec<&str> =
        page["entries"].as_array().unwrap().iter().map(|e| e["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["10@p", "9@p", "8@p", "7@p", "6@p"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn etags_give_304_and_long_poll_waits_for_writes() {
    let s = start().await;
    s.append_n("lp", 0, 2).await;
    let r = s.get("/streams/lp", &[ATOM]).await;
    let etag = r.header("etag").unwrap().to_owned();
    let r = s.get("/streams/lp", &[ATOM, ("if-none-match", &etag)]).await;
    assert_eq!((r.status, r.reason.as_str()), (304, "Not Modified"));
    assert!(r.body.is_empty() && r.header("etag").is_none());
    // Another media type's ETag does not match.
    let r = s.get("/streams/lp", &[("accept", "application/json"), ("if-none-match", &etag)]).await;
    assert_eq!(r.status, 200);

    // A long poll past the end returns as soon as an event arrives.
    let s = std::sync::Arc::new(s);
    let s2 = s.clone();
    let poll =
        tokio::spawn(async move { s2.get("/streams/lp/2/forward/20", &[ATOM, ("es-longpoll", "10")]).await });
    let env = annal::env::real::env();
    env.rt.sleep(std::time::Duration::from_millis(300)).await;
    assert!(!poll.is_finished());
    s.append_n("lp", 2, 1).await;
    let r = tokio::time::timeout(std::time::Duration::from_secs(5), poll).await.unwrap().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.json()["entries"][0]["title"], "2@lp");
    // With nothing new the poll ends after its time with an empty page.
    let t = env.clock.monotonic();
    let r = s.get("/streams/lp/3/forward/20", &[ATOM, ("es-longpoll", "1")]).await;
    assert!(env.clock.monotonic() - t >= std::time::Duration::from_millis(900));
    assert_eq!(r.json()["entries"], json!([]));
    let r = s.get("/streams/lp/3/forward/20", &[ATOM, ("es-longpoll", "soon")]).await;
    assert_eq!((r.status, r.reason.as_str()), (400, "ES-LongPoll header in wrong format."));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_events_in_every_type() {
    let s = start().await;
    let id = new_id();
    let r = s
        .post(
            "/streams/one",
            "application/json",
            &[("es-eventtype", "thing"), ("es-eventid", &id)],
            br#"{"a":{"b":[1,2]}}"#,
        )
        .await;
    assert_eq!(r.status, 201);
    let r = s
        .post(
            "/streams/one",
            "application/octet-stream",
            &[("es-eventtype", "blob"), ("es-eventid", &new_id())],
            b"\x00\x01bin",
        )
        .await;
    assert_eq!(r.header("location"), Some("http://h:2113/streams/one/1"));

    let r = s.get("/streams/one/0", &[ATOM]).await;
    assert_eq!(r.header("cache-control"), Some("max-age=31536000, public"));
    assert_eq!(r.header("etag"), None);
    let entry = r.json();
    assert_eq!(entry["content"]["eventId"], id);
    assert_feed_snapshot!("single_atom_json", &entry);

    let r = s.get("/streams/one/0", &[("accept", "application/json")]).await;
    assert_eq!(r.json(), json!({"a": {"b": [1, 2]}}));
    let r = s.get("/streams/one/0", &[("accept", "application/vnd.eventstore.event+json")]).await;
    assert_eq!(r.json()["data"], json!({"a": {"b": [1, 2]}}));
    assert_eq!(r.json()["eventType"], "thing");
    let r = s.get("/streams/one/0", &[]).await;
    assert_eq!(r.header("content-type"), Some("application/atom+xml; charset=utf-8"));
    assert!(r.text().contains("<summary>thing</summary>"));
    let r = s.get("/streams/one/0", &[("accept", "text/xml")]).await;
    assert!(r.text().ends_with("<data><a><b>1</b><b>2</b></a></data>"), "{}", r.text());
    let r = s.get("/streams/one/0", &[("accept", "application/vnd.eventstore.event+xml")]).await;
    assert!(r.text().contains("<eventType>thing</eventType>"), "{}", r.text());
    let r = s.get("/streams/one/1", &[("accept", "application/octet-stream")]).await;
    assert_eq!(r.header("content-type"), Some("application/octet-stream"));
    assert_eq!(r.body, b"\x00\x01bin");
    let r = s.get("/streams/one/1", &[ATOM]).await;
    assert_eq!(r.json().get("content"), None);
    let r = s.get("/streams/one/head", &[ATOM]).await;
    assert_eq!(r.header("etag"), Some("\"1;-2060438500\""));
    assert_eq!(r.json()["title"], "1@one");
    let r = s.get("/streams/one/0", &[("accept", "text/html")]).await;
    assert!(r.text().starts_with("<!DOCTYPE html>"));

    let r = s
        .post(
            "/streams/one",
            "text/xml",
            &[("es-eventtype", "Événement"), ("es-eventid", &new_id())],
            "<é/>".as_bytes(),
        )
        .await;
    assert_eq!(r.status, 201);
    assert_eq!(s.get("/streams/%C3%A9t%C3%A9", &[ATOM]).await.status, 404);
    let r = s.get("/streams/one/7", &[ATOM]).await;
    assert_eq!((r.status, r.reason.as_str(), r.text().as_str()), (404, "Not Found", "{}"));
    let r = s.get("/streams/one/7", &[("accept", "application/atom+xml")]).await;
    assert_eq!((r.status, r.body.len()), (404, 0));
    let r = s.get("/streams/one/x", &[ATOM]).await;
    assert_eq!((r.status, r.reason.as_str()), (400, "'x' is not valid event number"));
    let r = s.get("/streams/one/0", &[("accept", "image/png")]).await;
    assert_eq!((r.status, r.reason.as_str()), (406, "Requested URI is not available in requested format"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redirect_to_incoming_and_idempotency() {
    let s = start().await;
    let r = s.post("/streams/red", "application/json", &[("es-eventtype", "t")], b"{}").await;
    assert_eq!((r.status, r.reason.as_str()), (307, "Temporary Redirect"));
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    let loc = r.header("location").unwrap().replace("http://h:2113", "");
    assert!(loc.starts_with("/streams/red/incoming/"), "{loc}");
    let r = s.post(&loc, "application/json", &[("es-eventtype", "t")], br#"{"x":1}"#).await;
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some("http://h:2113/streams/red/0"));
    // The same URL again is idempotent.
    let r = s.post(&loc, "application/json", &[("es-eventtype", "t")], br#"{"x":1}"#).await;
    assert_eq!(r.header("location"), Some("http://h:2113/streams/red/0"));
    let page = s.get("/streams/red", &[ATOM]).await.json();
    assert_eq!(page["entries"].as_array().unwrap().len(), 1);
    // Batch types are refused on the incoming route.
    let r = s.post(&loc, EVENTS_JSON, &[], b"[]").await;
    assert_eq!((r.status, r.reason.as_str()), (415, "Invalid or missing Content-Type"));
    let r =
        s.post("/streams/red/incoming/not-a-guid", "application/json", &[("es-eventtype", "t")], b"{}").await;
    assert_eq!(r.status, 400);

    // A batch retried with -2 or an explicit version is idempotent; a half-matching one is not.
    let (a, b) = (new_id(), new_id());
    let batch =
        json!([{"eventId": a, "eventType": "x", "data": {}}, {"eventId": b, "eventType": "x", "data": {}}])
            .to_string();
    let r = s.post("/streams/idem", EVENTS_JSON, &[("es-expectedversion", "-1")], batch.as_bytes()).await;
    assert_eq!(r.header("location"), Some("http://h:2113/streams/idem/0"));
    let r = s.post("/streams/idem", EVENTS_JSON, &[("es-expectedversion", "-1")], batch.as_bytes()).await;
    assert_eq!((r.status, r.header("location")), (201, Some("http://h:2113/streams/idem/0")));
    let r = s.post("/streams/idem", EVENTS_JSON, &[], batch.as_bytes()).await;
    assert_eq!(r.status, 201);
    let other = json!([{"eventId": a, "eventType": "x", "data": {}}, {"eventId": new_id(), "eventType": "x", "data": {}}]).to_string();
    let r = s.post("/streams/idem", EVENTS_JSON, &[], other.as_bytes()).await;
    assert_eq!((r.status, r.reason.as_str()), (400, "Wrong expected EventNumber"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expected_versions_and_deletes() {
    let s = start().await;
    let one = |id: String| json!([{"eventId": id, "eventType": "x", "data": {"k": 1}}]).to_string();
    let r =
        s.post("/streams/ev", EVENTS_JSON, &[("es-expectedversion", "-4")], one(new_id()).as_bytes()).await;
    assert_eq!(
        (r.status, r.reason.as_str(), r.header("es-currentversion")),
        (400, "Wrong expected EventNumber", Some("-1"))
    );
    let r =
        s.post("/streams/ev", EVENTS_JSON, &[("es-expectedversion", "-1")], one(new_id()).as_bytes()).await;
    assert_eq!(r.status, 201);
    let r =
        s.post("/streams/ev", EVENTS_JSON, &[("es-expectedversion", "5")], one(new_id()).as_bytes()).await;
    assert_eq!((r.status, r.header("es-currentversion")), (400, Some("0")));
    let r =
        s.post("/streams/ev", EVENTS_JSON, &[("es-expectedversion", "0")], one(new_id()).as_bytes()).await;
    assert_eq!(r.status, 201);
    for bad in ["x", "-5", "1.5"] {
        let r = s
            .post("/streams/ev", EVENTS_JSON, &[("es-expectedversion", bad)], one(new_id()).as_bytes())
            .await;
        assert_eq!((r.status, r.reason.as_str()), (400, "ES-ExpectedVersion header in wrong format."));
    }
    let r =
        s.post("/streams/ev", EVENTS_JSON, &[("es-requiremaster", "maybe")], one(new_id()).as_bytes()).await;
    assert_eq!((r.status, r.reason.as_str()), (400, "ES-RequireMaster header in wrong format."));
    let r =
        s.post("/streams/ev", EVENTS_JSON, &[("es-requiresmaster", "True")], one(new_id()).as_bytes()).await;
    assert_eq!(r.status, 201);

    // Soft delete: 404 on read, writing again continues the numbering.
    let r = s.request("DELETE", "/streams/ev", &[("es-expectedversion", "9")], b"").await;
    assert_eq!(
        (r.status, r.reason.as_str(), r.header("es-currentversion")),
        (400, "Wrong expected EventNumber", None)
    );
    let r = s.request("DELETE", "/streams/ev", &[], b"").await;
    assert_eq!((r.status, r.reason.as_str()), (204, "Stream deleted"));
    let r = s.get("/streams/ev", &[ATOM]).await;
    assert_eq!((r.status, r.reason.as_str()), (404, "Not Found"));
    let r = s.post("/streams/ev", EVENTS_JSON, &[], one(new_id()).as_bytes()).await;
    assert_eq!(r.header("location"), Some("http://h:2113/streams/ev/3"));
    let page = s.get("/streams/ev", &[ATOM]).await.json();
    assert_eq!(page["entries"].as_array().unwrap().len(), 1);

    // Hard delete: 410 for reads and writes, and for the metadata.
    let r = s.request("DELETE", "/streams/ev", &[("es-harddelete", "yes")], b"").await;
    assert_eq!((r.status, r.reason.as_str()), (400, "ES-HardDelete header in wrong format."));
    let r = s.request("DELETE", "/streams/ev", &[("es-harddelete", "True")], b"").await;
    assert_eq!(r.status, 204);
    let r = s.get("/streams/ev", &[ATOM]).await;
    assert_eq!((r.status, r.reason.as_str()), (410, "Deleted"));
    let r = s.get("/streams/ev/0", &[ATOM]).await;
    assert_eq!(r.status, 410);
    let r = s.post("/streams/ev", EVENTS_JSON, &[], one(new_id()).as_bytes()).await;
    assert_eq!((r.status, r.reason.as_str()), (410, "Stream deleted"));
    let r = s.request("DELETE", "/streams/ev", &[], b"").await;
    assert_eq!(r.status, 410);
    let r = s.get("/streams/ev/metadata", &[ATOM]).await;
    assert_eq!(r.status, 410);
    let r = s.get("/streams/never", &[ATOM]).await;
    assert_eq!(r.status, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_stream_pages_by_position() {
    let s = start().await;
    s.append_n("a1", 0, 3).await;
    s.append_n("a2", 0, 2).await;
    let r = s.get("/streams/$all", &[ATOM]).await;
    assert_eq!((r.status, r.header("www-authenticate")), (401, Some("BasicCustom realm=\"ES\"")));
    let r = s.get("/streams/%24all?embed=rich", &[ATOM, ADMIN]).await;
    assert_eq!(r.status, 200);
    assert!(r.header("etag").is_some());
    let head = r.json();
    assert_eq!(head["title"], "All events");
    assert_eq!(head["id"], "http://h:2113/streams/%24all");
    assert_eq!(head.get("streamId"), None);
    assert_eq!(head["headOfStream"], false);
    let entries = head["entries"].as_array().unwrap();
    let titles: Vec<&str> = entries.iter().map(|e| e["title"].as_str().unwrap()).take(5).collect();
    assert_eq!(titles, ["1@a2", "0@a2", "2@a1", "1@a1", "0@a1"]);
    // Paging with a page size of 2: follow `next` to the start, then `previous` forward again.
    let page = s.get("/streams/$all/head/backward/2", &[ATOM, ADMIN]).await.json();
    let next = uris(&page).into_iter().find(|(r, _)| r == "next").unwrap().1;
    let token = next.split('/').nth(3).unwrap().to_owned();
    assert_eq!(token.len(), 32);
    let page2 = s.get(&next, &[ATOM, ADMIN]).await;
    assert_eq!(page2.header("cache-control"), Some("max-age=31536000, private"));
    let titles: Vec<String> = page2.json()["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["title"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(titles, ["2@a1", "1@a1"]);
    let fwd = s.get(&format!("/streams/$all/{token}/forward/2"), &[ATOM, ADMIN]).await.json();
    let titles: Vec<&str> =
        fwd["entries"].as_array().unwrap().iter().map(|e| e["title"].as_str().unwrap()).collect();
    assert_eq!(titles, ["1@a2", "0@a2"]);
    let start = s.get("/streams/$all/00000000000000000000000000000000/forward/1", &[ATOM, ADMIN]).await;
    assert_eq!(start.status, 200);
    assert_eq!(start.header("cache-control"), Some("max-age=31536000, private"));
    let r = s.get("/streams/$all", &[ATOM, ADMIN]).await;
    let etag = r.header("etag").unwrap().to_owned();
    let r = s.get("/streams/$all", &[ATOM, ADMIN, ("if-none-match", &etag)]).await;
    assert_eq!(r.status, 304);
    let r = s.get("/streams/$all", &[ADMIN, ("accept", "application/atom+xml")]).await;
    assert!(r.text().contains("<title>All events</title>"));
    let r = s.get("/streams/$all", &[ADMIN, ("accept", "text/html")]).await;
    assert_eq!(r.header("content-type"), Some("text/html; charset=utf-8"));
    for bad in ["123", "zz000000000000000000000000000000", "head"] {
        let r = s.get(&format!("/streams/$all/{bad}/forward/2"), &[ATOM, ADMIN]).await;
        assert_eq!((r.status, r.reason.clone()), (400, format!("Invalid position argument: {bad}")));
    }
    // Writes to $all are refused by the ACL.
    let one = json!([{"eventId": new_id(), "eventType": "x", "data": {}}]).to_string();
    let r = s.post("/streams/$all", EVENTS_JSON, &[ADMIN], one.as_bytes()).await;
    assert_eq!(r.status, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn description_document_and_negotiation() {
    let s = start().await;
    let r = s.get("/streams/dd", &[]).await;
    assert_eq!(r.status, 406);
    assert_eq!(r.header("content-type"), Some("application/vnd.eventstore.streamdesc+json; charset=utf-8"));
    insta::assert_json_snapshot!("description_document", r.json());
    let r = s.get("/streams/dd", &[("accept", "*/*")]).await;
    assert_eq!((r.status, r.reason.as_str()), (406, "Description Document"));
    let r = s.get("/streams/dd", &[("accept", "application/vnd.eventstore.streamdesc+json")]).await;
    assert_eq!((r.status, r.reason.as_str()), (200, "Description Document"));
    let r = s.get("/streams/dd?format=json", &[]).await;
    assert_eq!(r.status, 404);
    let r = s.get("/streams/dd?format=yaml", &[]).await;
    assert_eq!(r.status, 400);
    let r = s.get("/streams/dd/", &[]).await;
    assert_eq!((r.status, r.header("location")), (307, Some("http://h:2113/streams/dd")));
    assert_eq!(r.header("cache-control"), Some("max-age=31536000, public"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_resolve_and_show_as_links() {
    let s = start().await;
    s.append_n("target", 0, 1).await;
    let link = json!([{"eventId": new_id(), "eventType": "$>", "data": "0@target"},
                      {"eventId": new_id(), "eventType": "$>", "data": "5@target"}]);
    let r = s.post("/streams/links", EVENTS_JSON, &[], link.to_string().as_bytes()).await;
    assert_eq!(r.status, 201);
    let page = s.get("/streams/links?embed=body", &[ATOM]).await.json();
    let e = &page["entries"];
    assert_eq!(e[1]["title"], "0@target");
    assert_eq!(e[1]["summary"], "$>");
    assert_eq!(e[1]["eventType"], "type-0");
    assert_eq!(e[1]["positionStreamId"], "links");
    assert_eq!(e[1]["positionEventNumber"], 0);
    assert_eq!(e[1]["linkMetaData"], "");
    // A missing target: named, but nothing embedded.
    assert_eq!(e[0]["title"], "5@target");
    assert_eq!(e[0].get("eventType"), None);
    let page = s.get("/streams/links?embed=rich", &[ATOM, ("es-resolvelinktos", "false")]).await.json();
    assert_eq!(page["entries"][1]["title"], "0@links");
    assert_eq!(page["entries"][1]["eventType"], "$>");
    let r = s.get("/streams/links", &[ATOM, ("es-resolvelinktos", "nope")]).await;
    assert_eq!((r.status, r.reason.as_str()), (400, "ES-ResolveLinkTos header in wrong format."));
    let r = s.get("/streams/links/1", &[ATOM]).await;
    assert_eq!(r.status, 404);
    let r = s.get("/streams/links/0", &[("accept", "application/json")]).await;
    assert_eq!(r.json(), json!({"n": 0}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_gets_4xx() {
    let s = start_small_append().await;
    type Case<'a> = (&'a str, &'a str, Vec<(&'a str, &'a str)>, Vec<u8>, u16, &'a str);
    let cases: Vec<Case> = vec![
        ("/streams/b", EVENTS_JSON, vec![], b"{not json".to_vec(), 400, "Write request body invalid."),
        ("/streams/b", EVENTS_JSON, vec![], b"[]".to_vec(), 400, "Write request body invalid."),
        (
            "/streams/b",
            EVENTS_JSON,
            vec![],
            br#"[{"eventType":"x"}]"#.to_vec(),
            400,
            "Empty eventId provided.",
        ),
        (
            "/streams/b",
            "application/json",
            vec![("es-eventtype", "x"), ("es-eventid", "nope")],
            b"{}".to_vec(),
            400,
            "ES-EventId header in wrong format.",
        ),
        (
            "/streams/b",
            "application/json",
            vec![],
            b"{}".to_vec(),
            400,
            "Must include an event type with the request either in body or as ES-EventType header.",
        ),
        (
            "/streams/b",
            "application/json",
            vec![("es-eventtype", "x"), ("es-eventid", "fbf4a1a1-b4a3-4dfe-a01f-ec52c34e16e4")],
            b"{oops".to_vec(),
            400,
            "Write request body invalid.",
        ),
        ("/streams/b", "text/csv", vec![], b"a,b".to_vec(), 415, "Invalid or missing Content-Type"),
        ("/streams/b", "Application/JSON", vec![], b"{}".to_vec(), 415, "Invalid or missing Content-Type"),
        ("/streams/b", EVENTS_JSON, vec![], vec![b' '; 5000], 413, ""),
        ("/streams/..", EVENTS_JSON, vec![], b"[]".to_vec(), 400, "Invalid stream name"),
        ("/streams/a%2Fb", EVENTS_JSON, vec![], b"[]".to_vec(), 400, "Invalid stream name"),
        ("/streams/%FF%FE", EVENTS_JSON, vec![], b"[]".to_vec(), 400, "Invalid URL encoding"),
    ];
    for (path, ct, headers, body, status, reason) in cases {
        let r = s.post(path, ct, &headers, &body).await;
        assert_eq!(
            r.status,
            status,
            "{path} {ct} {:?}: {r:?}",
            String::from_utf8_lossy(&body[..body.len().min(40)])
        );
        if !reason.is_empty() {
            assert_eq!(r.reason, reason, "{path} {ct}");
        }
    }
    let r = s.post("/streams/b", EVENTS_JSON, &[("content-length", "999999")], b"").await;
    assert!(r.status == 413 || r.status == 400, "{r:?}");
    for (path, status) in [
        ("/streams/b/0/forward/0", 400),
        ("/streams/b/0/forward/x", 400),
        ("/streams/b/0/forward/4097", 400),
        ("/streams/b/head/forward/5", 400),
        ("/streams/b/-1/backward/5", 400),
        ("/streams/b/0/sideways/5", 404),
    ] {
        let r = s.get(path, &[ATOM]).await;
        assert_eq!(r.status, status, "{path}: {r:?}");
    }
    let r = s.get("/streams/b/0/forward/0", &[ATOM]).await;
    assert_eq!(r.reason, "'0' is not valid count. Should be positive integer");
    // The node still serves.
    s.append_n("b", 0, 1).await;
    let r = s.get("/streams/b/0/forward/4096", &[ATOM]).await;
    assert_eq!(r.status, 200);
}

async fn start_small_append() -> support::Server {
    support::start_with(|c| c.max_append_bytes = 4096).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn xml_bodies_append() {
    let s = start().await;
    let id = new_id();
    let body = format!(
        "<?xml version=\"1.0\"?><Events><Event><eventId>{id}</eventId><eventType>x</eventType>\
         <data><a>1</a></data><metadata>m</metadata></Event></Events>"
    );
    let r = s.post("/streams/xml", "application/vnd.eventstore.events+xml", &[], body.as_bytes()).await;
    assert_eq!(r.status, 201, "{r:?}");
    let r = s
        .post("/streams/xml", "text/xml", &[("es-eventtype", "raw"), ("es-eventid", &new_id())], b"<a>1</a>")
        .await;
    assert_eq!(r.status, 201);
    let page = s.get("/streams/xml?embed=body", &[ATOM]).await.json();
    assert_eq!(page["entries"][1]["data"], "{\"a\":\"1\"}");
    assert_eq!(page["entries"][1]["metaData"], "m");
    assert_eq!(page["entries"][0]["isJson"], false);
    let r = s.post("/streams/xml", "application/vnd.eventstore.events+xml", &[], b"<Events><Event>").await;
    assert_eq!(r.status, 400);
}

/// A body that arrives after its headers, in pieces (fixed length and chunked), is read whole:
/// the request waits for it rather than answering from what came first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_sent_in_pieces_after_the_headers_are_read_whole() {
    let s = start().await;
    let env = annal::env::real::env();
    let body = serde_json::to_vec(
        &json!([{"eventId": new_id(), "eventType": "late", "data": {"a": "x".repeat(3000)}}]),
    )
    .unwrap();
    let (first, rest) = body.split_at(1000);
    let chunked =
        |b: &[u8]| [format!("{:x}\r\n", b.len()).into_bytes(), b.to_vec(), b"\r\n".to_vec()].concat();
    for (stream, head, pieces) in [
        ("late-length", format!("content-length: {}\r\n", body.len()), vec![first.to_vec(), rest.to_vec()]),
        (
            "late-chunked",
            "transfer-encoding: chunked\r\n".to_owned(),
            vec![chunked(first), [chunked(rest), b"0\r\n\r\n".to_vec()].concat()],
        ),
    ] {
        let mut c = env.net.connect(s.client.addr).await.unwrap();
        let head = format!(
            "POST /streams/{stream} HTTP/1.1\r\nhost: h\r\nconnection: close\r\ncontent-type: {EVENTS_JSON}\r\n{head}\r\n"
        );
        c.write_all(head.as_bytes()).await.unwrap();
        for p in pieces {
            env.rt.sleep(std::time::Duration::from_millis(150)).await;
            c.write_all(&p).await.unwrap();
        }
        let mut out = Vec::new();
        tokio::time::timeout(std::time::Duration::from_secs(20), c.read_to_end(&mut out))
            .await
            .unwrap()
            .unwrap();
        let r = support::parse(&out);
        assert_eq!(r.status, 201, "{stream}: {r:?}");
        let e = s.get(&format!("/streams/{stream}/0"), &[("accept", "application/json")]).await;
        assert_eq!(e.status, 200, "{stream}");
        assert_eq!(e.json()["a"].as_str().map(str::len), Some(3000), "{stream}");
    }
}
