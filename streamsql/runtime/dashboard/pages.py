"""The dashboard's HTML, rendered on the server: the job list, a job's page, the login form.

Each page is complete as served (the numbers of the moment, the operator graphs as SVG);
``assets/dashboard.js`` then polls the page's JSON endpoint (``data-api``) every second and
puts the new numbers in place, draws the plots, and sends STOP. Everything it needs is
served from the package (``/assets/``): no CDN, no build step.
"""

from __future__ import annotations

from html import escape

from streamsql.runtime.dashboard.plan_graph import NATIVE, layout

# (key of a job view's ``display``, heading): the job list's columns after the job itself
LIST_COLUMNS = [("status", "Status"), ("uptime", "Uptime"), ("rows_in", "Rows in"), ("rows_out", "Rows out"),
                ("input_rate", "Input rate"), ("processed_rate", "Processed"), ("watermark", "Watermark"),
                ("watermark_lag", "Lag"), ("late_rows", "Late rows"), ("state", "State"),
                ("last_commit", "Last commit"), ("restarts", "Restarts"), ("error", "Error")]
FACTS = [("status", "Status"), ("started", "Started"), ("uptime", "Uptime"), ("rows_in", "Rows in"),
         ("rows_out", "Rows out"), ("input_rate", "Input rate"), ("processed_rate", "Processing rate"),
         ("batch_ms", "Last micro-batch"), ("watermark", "Watermark"), ("watermark_lag", "Watermark lag"),
         ("late_rows", "Late rows dropped"), ("state", "State"), ("last_commit", "Last commit"),
         ("restarts", "Restarts")]
# (metric of a micro-batch sample, title, unit): the job page's plots
CHARTS = [("input_rate", "Input rate", "rows/s"), ("processed_rate", "Processing rate", "rows/s"),
          ("duration_ms", "Micro-batch duration", "ms"), ("lag_s", "Watermark lag", "s"),
          ("state_bytes", "State size", "bytes")]
NODE_W, NODE_H, GAP_X, GAP_Y, PAD = 280, 92, 60, 26, 12


def _page(title: str, body: str, api: str | None = None, kind: str = "") -> str:
    data = f' data-api="{escape(api)}"' if api else ""
    return (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
            f"<title>{escape(title)} · streamsql</title><link rel=\"stylesheet\" href=\"/assets/dashboard.css\"></head>"
            f"<body class=\"{kind}\"{data}><header><a href=\"/\" class=\"brand\">streamsql</a>"
            f"<span class=\"updated\" id=\"updated\"></span></header><main>{body}</main>"
            f"<script src=\"/assets/dashboard.js\"></script></body></html>\n")


def job_list(jobs: list[dict]) -> str:
    heads = "".join(f'<th data-key="{key}">{escape(title)}</th>' for key, title in LIST_COLUMNS)
    rows = "".join(_job_row(job) for job in jobs)
    empty = "" if jobs else '<p class="empty" id="empty">No jobs yet: start one with <code>streamsql run --detach job.sql</code>.</p>'
    body = (f"<h1>Jobs</h1><div class=\"scroll\"><table class=\"jobs\" id=\"jobs\"><thead><tr><th data-key=\"name\">Job"
            f"</th>{heads}</tr></thead><tbody>{rows}</tbody></table></div>{empty}")
    return _page("Jobs", body, "/api/jobs", "list")


def _job_row(job: dict) -> str:
    shown = job["display"]
    cells = "".join(f'<td data-key="{key}" class="{key} {_status_class(job) if key == "status" else ""}">'
                    f'{escape(shown.get(key, ""))}</td>' for key, _ in LIST_COLUMNS)
    return (f'<tr data-job="{escape(job["id"])}"><td data-key="name"><a href="/jobs/{escape(job["id"])}">'
            f'{escape(job["name"])}</a><small>{escape(job["id"])}</small></td>{cells}</tr>')


def _status_class(job: dict) -> str:
    return f"status-{job['status'].lower()}"


def job_page(job: dict) -> str:
    shown = job["display"]
    facts = "".join(f'<div><dt>{escape(title)}</dt><dd data-key="{key}">{escape(shown.get(key, ""))}</dd></div>'
                    for key, title in FACTS)
    running = job["status"] == "RUNNING"
    disabled = "" if running else " disabled"
    ui = job.get("spark_ui") or ""  # Spark's own UI of the job's application (runtime.spark_ui), while it runs
    spark_ui = (f'<a class="spark-ui" id="spark-ui" href="{escape(ui)}" target="_blank" rel="noopener noreferrer"'
                f'{"" if running else " hidden"}>Spark\'s UI ↗</a>' if ui.startswith(("http://", "https://")) else "")
    buttons = (f'<div class="actions"><button id="stop" data-drain="false"{disabled}>STOP</button>'
               f'<button id="drain" data-drain="true"{disabled}>STOP WITH DRAIN</button>'
               f'<span id="action-result" role="status"></span>{spark_ui}</div>')
    error = f'<pre class="error" id="error"{"" if job["error"] else " hidden"}>{escape(job["error"] or "")}</pre>'
    plans = "".join(f'<div class="scroll">{_plan_section(plan)}</div>' for plan in job.get("plans") or []) or \
        '<p class="empty">No operator plan recorded (the job ran no streaming INSERT, or an older streamsql started it).</p>'
    charts = "".join(f'<figure class="chart"><figcaption>{escape(title)} <small>({escape(unit)})</small></figcaption>'
                     f'<svg id="chart-{metric}" data-metric="{metric}" data-unit="{escape(unit)}" viewBox="0 0 360 140"'
                     f' role="img" aria-label="{escape(title)}"></svg></figure>'
                     for metric, title, unit in CHARTS)
    log = job.get("log")
    log_text = (log or "(empty so far)") if log is not None else "(no log: the job was started without --detach, its output went to its terminal)"
    body = (f'<h1><span id="job-name">{escape(job["name"])}</span> <small>{escape(job["id"])}</small>'
            f' <span class="badge {_status_class(job)}" id="status-badge">{escape(job["status"])}</span></h1>'
            f'{buttons}{error}<dl class="facts">{facts}</dl>'
            f'<h2>Operator plan</h2>{plans}'
            f'<h2>Over time</h2><div class="charts">{charts}</div>'
            f'<h2>State operators</h2><table class="operators" id="operators"><thead><tr><th>Query</th><th>Operator</th>'
            f'<th>State rows</th><th>State bytes</th><th>Rows updated</th><th>Late rows</th></tr></thead>'
            f'<tbody>{_operator_rows(job.get("queries") or {})}</tbody></table>'
            f'<h2>Log</h2><p class="path">{escape(job.get("log_path") or "")}</p><pre class="log" id="log">{escape(log_text)}</pre>')
    return _page(job["name"], body, f"/api/jobs/{job['id']}", "job")


def _operator_rows(queries: dict) -> str:
    rows = []
    for query, totals in queries.items():
        for index, op in enumerate(totals.get("operators") or []):
            rows.append(f"<tr><td>{escape(query)}</td><td>{index}: {escape(str(op.get('name')))}</td>"
                        f"<td>{op.get('state_rows', 0):,}</td><td>{op.get('state_bytes', 0):,}</td>"
                        f"<td>{op.get('rows_updated', 0):,}</td><td>{op.get('late', 0):,}</td></tr>")
    return "".join(rows) or '<tr><td colspan="6" class="empty">none (no micro-batch kept state yet)</td></tr>'


def _plan_section(plan: dict) -> str:
    title = f'<h3>{escape(plan["query"])}</h3>'
    if plan.get("error"):
        return f'{title}<p class="error">The plan could not be drawn: {escape(plan["error"])}</p>'
    return title + plan_svg(plan) + "<details><summary>As EXPLAIN prints it</summary><pre>" + \
        escape("\n".join(node["explain"] for node in reversed(plan["nodes"]))) + "</pre></details>"


def plan_svg(plan: dict) -> str:
    """The plan as an SVG graph: a box per operator, an arrow from each input to its reader."""
    places = layout(plan)
    if not places:
        return ""
    width = (max(c for c, _ in places.values()) + 1) * (NODE_W + GAP_X) - GAP_X + 2 * PAD
    height = (max(r for _, r in places.values()) + 1) * (NODE_H + GAP_Y) - GAP_Y + 2 * PAD

    def corner(node_id: int) -> tuple[int, int]:
        col, row = places[node_id]
        return PAD + col * (NODE_W + GAP_X), PAD + row * (NODE_H + GAP_Y)

    rows = plan.get("rows") or {}
    parts = []
    for node in plan["nodes"]:
        x, y = corner(node["id"])
        for source in node["inputs"]:
            sx, sy = corner(source)
            parts.append(f'<path class="edge" d="M{sx + NODE_W},{sy + NODE_H // 2} C{sx + NODE_W + GAP_X // 2},'
                         f'{sy + NODE_H // 2} {x - GAP_X // 2},{y + NODE_H // 2} {x},{y + NODE_H // 2}"'
                         f' marker-end="url(#arrow)"/>')
    for node in plan["nodes"]:
        x, y = corner(node["id"])
        stateful = node["state"] != "none"
        runs = "native (Spark)" if node["runs"] == NATIVE else "streamsql operator"
        known = rows.get(str(node["id"])) or {}
        count = f"{known['out']:,} rows" if "out" in known else ""
        detail = node["text"][len(node["kind"]):].strip("()") or node.get("table") or ""
        parts.append(
            f'<g class="node {"stateful" if stateful else "stateless"} runs-{node["runs"]}" data-node="{node["id"]}"'
            f' data-kind="{escape(node["kind"])}" transform="translate({x},{y})"><title>{escape(node["explain"])}</title>'
            f'<rect width="{NODE_W}" height="{NODE_H}" rx="6"/>'
            f'<text class="kind" x="10" y="20">{escape(node["kind"])}</text>'
            f'<text class="detail" x="10" y="38">{escape(_clip(detail, 42))}</text>'
            f'<text class="mode" x="10" y="56">changelog [{escape(node["mode"])}] · {escape(runs)}</text>'
            f'<text class="state" x="10" y="74">state: {escape(node["state"])}</text>'
            f'<text class="rows" x="{NODE_W - 10}" y="20" text-anchor="end" data-rows="{node["id"]}">{count}</text></g>')
    return (f'<svg class="plan" data-query="{escape(plan["query"])}" viewBox="0 0 {width} {height}" width="{width}"'
            f' height="{height}" role="img" aria-label="operator plan of {escape(plan["query"])}">'
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7"'
            ' orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>' + "".join(parts) + "</svg>")


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 1] + "…"


def not_found(what: str) -> str:
    return _page("Not found", f'<h1>Not found</h1><p>{escape(what)}</p><p><a href="/">All jobs</a></p>', kind="missing")


def login(failed: bool = False) -> str:
    note = '<p class="error">Wrong token.</p>' if failed else ""
    body = (f"<h1>Sign in</h1>{note}<p>This dashboard needs the token it was started with (--token-file).</p>"
            '<form method="post" action="/login"><input type="password" name="token" autocomplete="current-password"'
            ' aria-label="token" autofocus required> <button type="submit">Sign in</button></form>')
    return _page("Sign in", body, kind="login")
