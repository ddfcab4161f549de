//! The operator's console at `/console`: one page, a script and a style sheet, embedded in the
//! binary (no build step, no request beyond this server). It is served with the REST data API
//! (`admin.restApi.enabled`) and uses nothing else: the AdminServer's commands for the server's
//! figures and its ensemble, the REST API for the tree (so it can edit only what the API's
//! `admin.restApi.writable` and the znodes' ACLs allow the credentials typed into it).

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{
    HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, X_CONTENT_TYPE_OPTIONS,
};
use hyper::{Response, StatusCode};

/// Where the console is served.
pub const PREFIX: &str = "/console";

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// Only this server's own script, style sheet and JSON; no inline script, no frame.
const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                      img-src 'self' data:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";

/// The answer to a GET of `path` under [`PREFIX`]; `None` for a path that is not the console's.
/// `command_url` is `admin.commandURL`, which the page's script asks.
pub fn asset(path: &str, command_url: &str) -> Option<Response<Full<Bytes>>> {
    let (body, content_type) = match path {
        "/console" | "/console/" | "/console/index.html" => {
            (INDEX.replace("{{COMMAND_URL}}", &escape_attribute(command_url)), "text/html; charset=utf-8")
        }
        "/console/console.js" => (SCRIPT.to_string(), "text/javascript; charset=utf-8"),
        "/console/console.css" => (STYLE.to_string(), "text/css; charset=utf-8"),
        _ => return None,
    };
    let mut r = Response::new(Full::new(Bytes::from(body)));
    *r.status_mut() = StatusCode::OK;
    let h = r.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(r)
}

/// `s` safe inside a double-quoted HTML attribute.
fn escape_attribute(s: &str) -> String {
    s.replace('&', "&amp;").replace('"', "&quot;").replace('<', "&lt;").replace('>', "&gt;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn assets_and_the_command_url() {
        let page = asset("/console", "/cmd\"x").unwrap();
        assert_eq!(page.headers()[CONTENT_TYPE], "text/html; charset=utf-8");
        assert!(page.headers()[CONTENT_SECURITY_POLICY].to_str().unwrap().contains("script-src 'self'"));
        assert!(INDEX.contains("data-commands=\"{{COMMAND_URL}}\""));
        assert!(
            INDEX.contains("src=\"/console/console.js\"") && INDEX.contains("href=\"/console/console.css\"")
        );
        assert!(asset("/console/console.js", "/commands").is_some());
        assert!(asset("/console/console.css", "/commands").is_some());
        assert!(asset("/console/nothing", "/commands").is_none());
        assert_eq!(escape_attribute("/cmd\"x<"), "/cmd&quot;x&lt;");
    }
}
