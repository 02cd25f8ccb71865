//! What every page shares: the HTML frame, error pages, content negotiation, and the headers that
//! keep the pages to themselves: a strict Content-Security-Policy (the page's one script and one
//! stylesheet by hash, nothing else) and `nosniff`.

use std::sync::LazyLock;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Json, Response};
use base64::Engine;
use maud::{DOCTYPE, Markup, html};
use serde::Serialize;
use sha2::{Digest, Sha256};

/// Every page's policy: its inline script and style by hash, no other script, style, frame,
/// plugin or connection; forms only to this origin; no framing by others.
pub static PAGE_POLICY: LazyLock<HeaderValue> = LazyLock::new(|| {
    let policy = format!(
        "default-src 'none'; script-src '{}'; style-src '{}'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'",
        sha256_source(SCRIPT),
        sha256_source(CSS)
    );
    HeaderValue::from_str(&policy).expect("a policy is ASCII")
});

/// A CSP hash source: `sha256-<base64 of the digest>`.
fn sha256_source(text: &str) -> String {
    format!("sha256-{}", base64::engine::general_purpose::STANDARD.encode(Sha256::digest(text.as_bytes())))
}

/// Adds `nosniff` to every response, and the page policy to HTML that has no policy of its own.
pub async fn secure_headers(mut response: Response) -> Response {
    let headers = response.headers_mut();
    headers.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    let html =
        headers.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).is_some_and(|v| v.starts_with("text/html"));
    if html && !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
        headers.insert(header::CONTENT_SECURITY_POLICY, PAGE_POLICY.clone());
    }
    response
}

/// True when the client asked for JSON (`Accept: application/json`).
pub fn wants_json(headers: &HeaderMap) -> bool {
    headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()).is_some_and(|v| v.contains("application/json"))
}

/// The same data as JSON or as the page `render` makes of it, as the client asked.
pub fn negotiate<T: Serialize>(
    headers: &HeaderMap,
    data: &T,
    title: &str,
    render: impl FnOnce(&T) -> Markup,
) -> Response {
    if wants_json(headers) { Json(data).into_response() } else { page(title, render(data)) }
}

pub fn page(title: &str, body: Markup) -> Response {
    let markup = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                // No favicon request (a 404 in every browser console).
                link rel="icon" href="data:,";
                title { (page_title(title)) }
                style { (maud::PreEscaped(CSS)) }
            }
            body {
                nav aria-label="site" {
                    a href="/" { "cloud-provider-harness" }
                    " " a href="/" { "matrix" }
                    " " a href="/lkg" { "last known good" }
                    " " a href="/clusters" { "failure clusters" }
                    " " a href="/flaky" { "flakiest tests" }
                }
                main { (body) }
                script { (maud::PreEscaped(SCRIPT)) }
            }
        }
    };
    Html(markup.into_string()).into_response()
}

/// At most 70 characters, as html-validate (and search results) want; the site's name when it fits.
fn page_title(title: &str) -> String {
    let full = format!("{title} · cloud-provider-harness");
    let chosen = if full.chars().count() <= 70 { full } else { title.to_owned() };
    match chosen.char_indices().nth(69) {
        Some((cut, _)) => format!("{}…", &chosen[..cut]),
        None => chosen,
    }
}

pub fn error_page(status: StatusCode, message: &str) -> Response {
    let mut response =
        page(status.canonical_reason().unwrap_or("error"), html! { h1 { (status.as_u16()) } p.error { (message) } });
    *response.status_mut() = status;
    response
}

pub fn not_found(message: &str) -> Response {
    error_page(StatusCode::NOT_FOUND, message)
}

/// `text` percent-encoded for a URL: every byte but RFC 3986's unreserved characters and `keep`.
pub fn percent_encode(text: &str, keep: &[u8]) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => encoded.push(byte as char),
            _ if keep.contains(&byte) => encoded.push(byte as char),
            _ => encoded.push_str(&format!("%{byte:02X}")),
        }
    }
    encoded
}

/// A table's header: one column header per name.
pub fn header_row(names: &[&str]) -> Markup {
    html! { thead { tr { @for name in names { th scope="col" { (name) } } } } }
}

/// A 40-hex commit shortened to 12, anything else as is.
pub fn short(version: &str) -> &str {
    if version.len() == 40 && version.bytes().all(|b| b.is_ascii_hexdigit()) { &version[..12] } else { version }
}

/// A link to a commit or tag in `repo` (a `https://github.com/...` URL), or the bare name.
pub fn revision_link(repo: Option<&str>, revision: &str) -> Markup {
    match repo.filter(|r| r.starts_with("https://")) {
        Some(repo) => {
            html! { a.rev href={ (repo.trim_end_matches('/')) "/tree/" (revision) } title=(revision) { (short(revision)) } }
        }
        None => html! { code title=(revision) { (short(revision)) } },
    }
}

/// The last second of year 9999 (UTC): later times have no four-digit year.
const LAST_TIME: i64 = 253_402_300_799;

/// Unix seconds as UTC `YYYY-MM-DD HH:MM UTC`; a time past year 9999 as its seconds.
pub fn time(seconds: i64) -> String {
    if seconds > LAST_TIME {
        return format!("{seconds} s after 1970 (past year 9999)");
    }
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(seconds.max(0).unsigned_abs());
    let rfc3339 = humantime::format_rfc3339_seconds(at).to_string(); // 2026-11-22T17:57:17Z
    format!("{} {} UTC", &rfc3339[..10], &rfc3339[11..16])
}

/// The only script: a grid cell opens its column's build (the header's link); a group's button
/// collapses or expands its rows.
const SCRIPT: &str = "document.querySelectorAll('table.grid').forEach(t=>t.addEventListener('click',e=>{\
const td=e.target.closest('td');if(!td)return;const a=t.tHead.rows[0].cells[td.cellIndex].querySelector('a');\
if(a)location.href=a.href;}));\
document.querySelectorAll('tr.group button').forEach(b=>b.addEventListener('click',()=>{\
const g=b.closest('tbody');b.setAttribute('aria-expanded',String(!g.classList.toggle('collapsed')));}));";

const CSS: &str = "body{font:14px system-ui,sans-serif;margin:0;color:#111}nav{padding:8px;background:#223}\
nav a{color:#fff;margin-right:12px}main{padding:8px}table.grid{border-collapse:separate;border-spacing:0}\
.gridwrap{overflow:auto;max-height:80vh;max-width:100%;border:1px solid #ddd}\
table.grid th,table.grid td{border:0 solid #ddd;border-width:0 1px 1px 0;padding:0}\
table.grid thead th{position:sticky;top:0;background:#fff;font-weight:normal;font-size:11px;padding:2px;z-index:2}\
table.grid th.test{position:sticky;left:0;background:#fff;text-align:left;padding:0 4px;white-space:nowrap;z-index:1}\
table.grid thead th.test{z-index:3}table.grid .name{display:flex;gap:6px;width:32em;max-width:40vw}\
table.grid .name a{flex:1 1 auto;min-width:0;overflow:hidden;text-overflow:ellipsis;color:#111;text-decoration:none}\
.n{color:#9e9e9e}tr.group th.test{background:#eceff1}tr.group button{font:bold 13px system-ui,sans-serif;border:0;background:none;cursor:pointer;padding:0}\
tr.group button::before{content:'\\25BE  '}tbody.collapsed tr.group button::before{content:'\\25B8  '}tbody.collapsed tr:not(.group){display:none}\
p.summary{font-size:15px;margin:4px 0}p.count{margin:4px 0}p.trend{margin:4px 0}\
svg.spark{vertical-align:middle;background:#f5f5f5}svg.spark polyline{fill:none;stroke:#1565c0;stroke-width:1.5}svg.spark circle{fill:#1565c0}\
.side{padding:1px 6px;border-radius:3px}.kubernetes-side{background:#ffcdd2}.provider-side{background:#bbdefb}.unclear{background:#eee}\
table.clusters,table.flaky,table.jobs{border-collapse:collapse}\
table.clusters th,table.clusters td,table.flaky th,table.flaky td,table.jobs th,table.jobs td{border:1px solid #ddd;padding:4px 6px;text-align:left;vertical-align:top}\
code.message{font-size:12px;color:#444;white-space:pre-wrap}\
table.grid td{width:14px;min-width:14px;height:16px;text-align:center;font-size:0;cursor:pointer}\
table.grid td::before{font-size:10px}td.fail::before{content:'F'}td.flaky::before{content:'~'}td.known-failure::before{content:'K'}\
td.skip::before{content:'s'}td.running::before{content:'R'}\
.pass{background:#4caf50}.fail{background:#e53935}.flaky{background:#ffb300}.known-failure{background:#8d6e63}.skip{background:#cfd8dc}\
.running{background:#64b5f6}.none{background:#fff}.pending{background:#fff59d}.bad{background:#e53935}.good{background:#4caf50}\
.cell{display:inline-block;width:12px;height:12px;border:1px solid #999}\
ul.legend{list-style:none;display:flex;gap:12px;padding:0;margin:4px 0}.since{color:#b71c1c;font-size:11px;flex:none}\
table.matrix{border-collapse:collapse}table.matrix th,table.matrix td{border:1px solid #ccc;padding:4px 8px;text-align:center}\
table.matrix td a{color:#000}\
.versionset,.provider{border:1px solid #ccc;padding:8px;margin:8px 0}dl.meta{display:grid;grid-template-columns:max-content auto;gap:2px 12px}\
dl.meta dt{font-weight:bold}pre.log{background:#111;color:#eee;padding:8px;overflow:auto;max-height:480px;font-size:12px}\
ol.steps li{display:inline-block;padding:2px 8px;margin-right:4px}svg.history rect{stroke:#fff}\
svg.history rect.good{fill:#4caf50}svg.history rect.pending{fill:#fff59d}svg.history rect.bad{fill:#e53935}\
p.axis{font-size:11px;color:#555;margin:0}\
table.suite{border-collapse:separate;border-spacing:0}table.suite th,table.suite td{border:0 solid #ccc;border-width:0 1px 1px 0;padding:2px 6px;text-align:left;vertical-align:top}\
table.suite td::before{content:none}table.suite thead th{position:sticky;top:0;background:#fff;font-weight:normal;font-size:12px;z-index:2}\
table.suite th.test{font-weight:normal;min-width:24em;max-width:48em}table.suite td a{color:#000}ol.notes li{margin:2px 0}";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles_fit_in_70_characters_and_times_read_as_utc_dates() {
        assert_eq!(page_title("Matrix"), "Matrix · cloud-provider-harness");
        let long = "ci-cloud-provider-something-long-k8s-1.37 · 1795370237160";
        assert_eq!(page_title(long), long);
        assert!(page_title(&"é".repeat(100)).chars().count() <= 70);
        assert_eq!(time(0), "1970-01-01 00:00 UTC");
        assert_eq!(time(1_795_370_237), "2026-11-22 17:57 UTC");
        assert_eq!(time(LAST_TIME), "9999-12-31 23:59 UTC");
        for past_9999 in [LAST_TIME + 1, 300_000_000_000, i64::MAX] {
            assert!(time(past_9999).contains("past year 9999"), "{past_9999}");
        }
    }

    #[test]
    fn the_page_policy_allows_the_pages_own_script_and_style_by_hash_and_nothing_inline_else() {
        let policy = PAGE_POLICY.to_str().unwrap();
        assert!(policy.starts_with("default-src 'none'; "), "{policy}");
        assert!(policy.contains(&format!("script-src '{}';", sha256_source(SCRIPT))), "{policy}");
        assert!(policy.contains(&format!("style-src '{}';", sha256_source(CSS))), "{policy}");
        assert!(!policy.contains("unsafe"), "{policy}");
        // The digest of the empty string, as `openssl dgst -sha256 -binary | base64` gives it.
        assert_eq!(sha256_source(""), "sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=");
    }
}
