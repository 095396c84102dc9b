//! `GET /metrics`: the tabs' health and the hub's counters for Prometheus (docs/api.md,
//! "Metrics"), encoded by `prometheus-client` in the OpenMetrics text format, which a scraper
//! gets when its `Accept` names `application/openmetrics-text`; everyone else gets the same
//! figures in the Prometheus text format 0.0.4 ([`to_text_004`]), which `promtool check
//! metrics` reads. The same figures as `?<tabs>!`, `/api/tabs`, `/v1/models` and MCP
//! `list_tabs`, read fresh on every scrape. Bearer token, Host and Origin are checked like on
//! `/v1`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, HeaderMap};
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;

use super::ApiDoor;
use crate::decide::Standing;
use crate::hub::registry::ConnState;

/// The content type of the OpenMetrics text format.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// The content type of the Prometheus text format.
pub const TEXT_CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

type Labels = Vec<(String, String)>;
type FloatGauge = Gauge<f64, AtomicU64>;
type Histograms = Family<Labels, Histogram, fn() -> Histogram>;

/// The doors' requests by status, their errors, and how long answers take: kept for the hub's
/// life (the rest of `/metrics` is read fresh from the hub on every scrape).
#[derive(Clone)]
pub struct DoorCounters {
    requests: Family<Labels, Counter>,
    errors: Family<Labels, Counter>,
    answers: Histogram,
    /// Every task's time from `accepted` to its first chunk, by site.
    first_chunk: Histograms,
    /// Every answered task's time from `accepted` to the answer, by site.
    task_seconds: Histograms,
}

impl Default for DoorCounters {
    fn default() -> Self {
        DoorCounters {
            requests: Family::default(),
            errors: Family::default(),
            // 0.25 s … 128 s: a tab's answer takes seconds to minutes.
            answers: Histogram::new(exponential_buckets(0.25, 2.0, 10)),
            // 0.25 s … 64 s: a site thinks for a moment, or searches for a minute.
            first_chunk: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.25, 2.0, 9))
            }),
            // 0.5 s … 256 s.
            task_seconds: Family::new_with_constructor(|| {
                Histogram::new(exponential_buckets(0.5, 2.0, 10))
            }),
        }
    }
}

impl DoorCounters {
    /// One answered request of `door` (`v1`, `mcp`, `api`, `metrics`, `realtime`, `page`).
    pub fn request(&self, door: &str, status: u16) {
        let labels = vec![
            ("door".to_string(), door.to_string()),
            ("status".to_string(), status.to_string()),
        ];
        self.requests.get_or_create(&labels).inc();
        if status >= 400 {
            let class = if status >= 500 { "5xx" } else { "4xx" };
            self.errors
                .get_or_create(&vec![
                    ("door".to_string(), door.to_string()),
                    ("class".to_string(), class.to_string()),
                ])
                .inc();
        }
    }

    /// One prompt answered through `/v1` or MCP: seconds from the hand-over to the whole reply.
    pub fn answer(&self, seconds: f64) {
        self.answers.observe(seconds);
    }

    /// A task's first chunk on a tab of `site`, `seconds` after the tab accepted it.
    pub fn first_chunk(&self, site: &str, seconds: f64) {
        self.first_chunk
            .get_or_create(&vec![("site".into(), site.to_lowercase())])
            .observe(seconds);
    }

    /// A task answered on a tab of `site`, `seconds` after the tab accepted it.
    pub fn task_time(&self, site: &str, seconds: f64) {
        self.task_seconds
            .get_or_create(&vec![("site".into(), site.to_lowercase())])
            .observe(seconds);
    }
}

/// The door a request path belongs to, for `aicard_requests_total`.
pub fn door_of(path: &str) -> &'static str {
    let first = path.trim_start_matches('/').split('/').next().unwrap_or("");
    match first {
        "v1" => "v1",
        "mcp" => "mcp",
        "api" => "api",
        "metrics" => "metrics",
        "realtime" | "ws" | "sse" | "events" => "realtime",
        _ => "page",
    }
}

/// Middleware over the whole router: counts each response by door and status.
pub async fn count(
    State(counters): State<DoorCounters>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let door = door_of(req.uri().path());
    let res = next.run(req).await;
    counters.request(door, res.status().as_u16());
    res
}

pub async fn metrics(State(door): State<Arc<ApiDoor>>, headers: HeaderMap) -> Response {
    if let Err(e) = super::authorize(&door, &headers) {
        return e.into_response();
    }
    let openmetrics = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .any(asks_openmetrics);
    match render(&door) {
        Ok(body) if openmetrics => ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response(),
        Ok(body) => (
            [(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)],
            to_text_004(&body),
        )
            .into_response(),
        Err(e) => {
            tracing::error!("metrics not encoded: {e}");
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "指标编码失败 / metrics could not be encoded",
            )
                .into_response()
        }
    }
}

/// Whether an `Accept` header asks for OpenMetrics (`application/openmetrics-text`, not with
/// `q=0`).
fn asks_openmetrics(accept: &str) -> bool {
    accept.split(',').any(|range| {
        let mut parts = range.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        let refused = parts.any(|p| {
            p.strip_prefix("q=")
                .and_then(|q| q.parse::<f64>().ok())
                .is_some_and(|q| q <= 0.0)
        });
        media.eq_ignore_ascii_case("application/openmetrics-text") && !refused
    })
}

/// The Prometheus text format (0.0.4) of an OpenMetrics exposition: a counter's `# HELP` and
/// `# TYPE` name its samples (`…_total`), as that format wants; `unknown` is `untyped`;
/// `# UNIT`, `# EOF` and exemplars go (the format has none).
pub fn to_text_004(openmetrics: &str) -> String {
    let counters: std::collections::HashSet<&str> = openmetrics
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(openmetrics.len());
    for line in openmetrics.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "]
            .into_iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        if let Some((prefix, rest)) = meta {
            let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
            let name = if counters.contains(name) {
                format!("{name}_total")
            } else {
                name.to_string()
            };
            let tail = if prefix == "# TYPE " && tail == "unknown" {
                "untyped"
            } else {
                tail
            };
            out.push_str(prefix);
            out.push_str(&name);
            out.push(' ');
            out.push_str(tail);
        } else if line.starts_with('#') {
            out.push_str(line);
        } else {
            // A sample; an exemplar follows ` # ` outside the labels.
            let cut = match line.find('}') {
                Some(end) => line[end..].find(" # ").map(|i| end + i),
                None => line.find(" # "),
            };
            out.push_str(&line[..cut.unwrap_or(line.len())]);
        }
        out.push('\n');
    }
    out
}

/// The whole exposition, ending in `# EOF`.
pub fn render(door: &ApiDoor) -> Result<String, std::fmt::Error> {
    let mut reg = Registry::with_prefix("aicard");
    let tabs = Family::<Labels, Gauge>::default();
    let up = Family::<Labels, Gauge>::default();
    let in_flight = Family::<Labels, Gauge>::default();
    let success = Family::<Labels, FloatGauge>::default();
    let outcomes = Family::<Labels, Gauge>::default();
    let ttft = Family::<Labels, FloatGauge>::default();
    let per_1k = Family::<Labels, FloatGauge>::default();
    let cooling = Family::<Labels, FloatGauge>::default();
    let parked = Family::<Labels, Gauge>::default();
    let answers = Family::<Labels, Counter>::default();
    let site_answers = Family::<Labels, Counter>::default();
    let outdated = Family::<Labels, Gauge>::default();
    let mut sites = std::collections::BTreeSet::new();
    let node = door.engine.node().to_string();
    for c in door.registry.all() {
        let info = c.info();
        let connected = c.state() == ConnState::Connected;
        let state = if connected { "connected" } else { "lost" };
        tabs.get_or_create(&vec![("state".into(), state.into())])
            .inc();
        let labels: Labels = vec![
            ("tab".into(), c.display_of(&info)),
            ("site".into(), info.site.to_lowercase()),
            ("role".into(), info.role.as_str().into()),
            ("node".into(), c.node().unwrap_or_else(|| node.clone())),
        ];
        up.get_or_create(&labels).set(i64::from(connected));
        let paths = door.paths.tab(&c.id);
        for (path, n) in [
            ("network", paths.network),
            ("dom", paths.dom),
            ("empty", paths.empty),
        ] {
            let mut l = labels.clone();
            l.push(("path".into(), path.into()));
            answers.get_or_create(&l).inc_by(n);
        }
        sites.insert(info.site.to_lowercase());
        let row = crate::pick::health(&door.asks.pick, &c);
        in_flight.get_or_create(&labels).set(row.in_flight as i64);
        success.get_or_create(&labels).set(row.p);
        outcomes.get_or_create(&labels).set(i64::from(row.outcomes));
        if let Some(s) = row.ttft_s {
            ttft.get_or_create(&labels).set(s);
        }
        if let Some(s) = row.s_per_1k {
            per_1k.get_or_create(&labels).set(s);
        }
        match row.standing {
            Standing::Cooling(ms) => {
                cooling.get_or_create(&labels).set(ms as f64 / 1000.0);
            }
            Standing::Parked(t) => {
                let mut l = labels.clone();
                l.push(("reason".into(), t.as_str().into()));
                parked.get_or_create(&l).set(1);
            }
            _ => {}
        }
    }
    for site in &sites {
        let paths = door.paths.site(site);
        for (path, n) in [
            ("network", paths.network),
            ("dom", paths.dom),
            ("empty", paths.empty),
        ] {
            let l: Labels = vec![("site".into(), site.clone()), ("path".into(), path.into())];
            site_answers.get_or_create(&l).inc_by(n);
        }
        let flagged = door.paths.flag(site).is_some();
        outdated
            .get_or_create(&vec![("site".into(), site.clone())])
            .set(i64::from(flagged));
    }
    reg.register("tabs", "Tabs this hub knows, by connection state", tabs);
    reg.register(
        "tab_answers",
        "Answers of the tab by the path they took: network (stream parsed), dom (page text), empty",
        answers,
    );
    reg.register(
        "site_answers",
        "Answers on the site by the path they took: network, dom, empty",
        site_answers,
    );
    reg.register(
        "site_adapter_outdated",
        "1 when more than half of the site's last 10 answers came by page text or empty",
        outdated,
    );
    reg.register("tab_up", "1 while the tab is connected", up);
    reg.register(
        "tab_in_flight",
        "Tasks the tab works on or waits for",
        in_flight,
    );
    reg.register(
        "tab_success_probability",
        "Success probability over the tab's recent window (Beta(1,1) prior)",
        success,
    );
    reg.register(
        "tab_window_outcomes",
        "Outcomes in the tab's sliding window",
        outcomes,
    );
    reg.register(
        "tab_first_chunk_seconds",
        "EWMA of the time to the first streamed chunk",
        ttft,
    );
    reg.register(
        "tab_seconds_per_1k_chars",
        "EWMA of seconds per 1,000 characters of reply",
        per_1k,
    );
    reg.register(
        "tab_cooling_seconds",
        "Seconds left of the tab's cooldown after rate limiting",
        cooling,
    );
    reg.register(
        "tab_parked",
        "1 while the tab waits for a person (captcha, login)",
        parked,
    );
    let gauge = |v: u64| {
        let g = Gauge::<i64>::default();
        g.set(v as i64);
        g
    };
    reg.register(
        "runs_active",
        "Flow runs in progress on this hub",
        gauge(door.runner.list().len() as u64),
    );
    let counter = |v: u64| {
        let c = Counter::<u64>::default();
        c.inc_by(v);
        c
    };
    let s = door.engine.stats();
    let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
    reg.register(
        "cluster_batches_sent",
        "Batches this node sent to other nodes (one NATS request each)",
        counter(load(&s.batches_sent)),
    );
    reg.register(
        "cluster_envelopes_sent",
        "Envelopes inside the batches this node sent",
        counter(load(&s.envelopes_sent)),
    );
    reg.register(
        "cluster_presence_messages",
        "Presence messages this node published",
        counter(load(&s.presence_writes)),
    );
    let w = door.webhooks.stats();
    reg.register(
        "webhook_backlog",
        "Lifecycle events waiting for their webhook receivers",
        gauge(load(&w.backlog)),
    );
    for (name, help, v) in [
        (
            "webhook_delivered",
            "Webhook events a receiver accepted (2xx)",
            &w.delivered,
        ),
        (
            "webhook_retried",
            "Webhook tries that failed and were tried again",
            &w.retried,
        ),
        (
            "webhook_failed",
            "Webhook events given up on or refused by the receiver",
            &w.failed,
        ),
        (
            "webhook_dropped",
            "Webhook events dropped because a receiver's backlog was full",
            &w.dropped,
        ),
    ] {
        reg.register(name, help, counter(load(v)));
    }
    let b = &door.bus.stats;
    for (name, help, v) in [
        (
            "events_published",
            "Events on this hub's bus (published here, or come from another node)",
            &b.published,
        ),
        (
            "rules_fired",
            "Standing rules (subscribe) whose command ran",
            &b.fired,
        ),
        (
            "rules_failed",
            "Standing rules whose command failed or could not run",
            &b.failed,
        ),
        (
            "events_lagged",
            "Events a listener lost because it fell too far behind",
            &b.lagged,
        ),
    ] {
        reg.register(name, help, counter(load(v)));
    }
    let c = door.api.counters();
    reg.register(
        "requests",
        "Requests the hub answered, by door (v1, mcp, api, metrics, realtime, page) and HTTP status",
        c.requests.clone(),
    );
    reg.register(
        "request_errors",
        "Requests answered with an error, by door and class (4xx, 5xx)",
        c.errors.clone(),
    );
    reg.register(
        "answer_seconds",
        "Seconds from a /v1 or MCP prompt handed to its tab to the whole answer",
        c.answers.clone(),
    );
    reg.register(
        "task_first_chunk_seconds",
        "Seconds from a tab accepting a task to the first chunk of its reply, by site",
        c.first_chunk.clone(),
    );
    reg.register(
        "task_seconds",
        "Seconds from a tab accepting a task to its whole answer, by site",
        c.task_seconds.clone(),
    );
    let tally = &door.tasks.tally;
    let tasks = Family::<Labels, Counter>::default();
    for (site, outcome, n) in tally.tasks() {
        let l: Labels = vec![("site".into(), site), ("outcome".into(), outcome.into())];
        tasks.get_or_create(&l).inc_by(n);
    }
    reg.register(
        "tasks",
        "Tasks given to tabs, by site and outcome (completed, failed, timeout, lost, refused, cancelled)",
        tasks,
    );
    let commands = Family::<Labels, Counter>::default();
    let (ok, failed) = tally.commands();
    for (outcome, n) in [("ok", ok), ("failed", failed)] {
        commands
            .get_or_create(&vec![("outcome".into(), outcome.into())])
            .inc_by(n);
    }
    reg.register(
        "commands",
        "Commands tabs sent that were answered (cmd_result), by outcome (ok, failed)",
        commands,
    );
    let mut out = String::new();
    encode(&mut out, &reg)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_format_names_counters_by_their_samples_and_drops_what_it_lacks() {
        let om = "# HELP aicard_requests Requests.\n# TYPE aicard_requests counter\n\
                  aicard_requests_total{door=\"v1\"} 3 # {trace=\"a\"} 1\n\
                  # HELP aicard_tab_up Up.\n# TYPE aicard_tab_up gauge\n# UNIT aicard_tab_up x\n\
                  aicard_tab_up{tab=\"a # b\"} 1\n# TYPE odd unknown\nodd 2\n# EOF\n";
        assert_eq!(
            to_text_004(om),
            "# HELP aicard_requests_total Requests.\n# TYPE aicard_requests_total counter\n\
             aicard_requests_total{door=\"v1\"} 3\n\
             # HELP aicard_tab_up Up.\n# TYPE aicard_tab_up gauge\n\
             aicard_tab_up{tab=\"a # b\"} 1\n# TYPE odd untyped\nodd 2\n"
        );
    }

    #[test]
    fn openmetrics_only_when_asked() {
        assert!(asks_openmetrics(
            "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
        ));
        assert!(!asks_openmetrics("text/plain;version=0.0.4"));
        assert!(!asks_openmetrics("*/*"));
        assert!(!asks_openmetrics(
            "application/openmetrics-text;q=0,text/plain"
        ));
    }
}
