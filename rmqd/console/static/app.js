/* rmqd console: a small single-page UI over /api (no framework, nothing from another host).
   Every view has its own URL (history API); pages render into #main and set data-page / data-ready. */
"use strict";

const S = { session: { readOnly: false, mode: "" }, cleanup: [] };
const main = document.getElementById("main");

// ------------------------------------------------------------------ helpers
function h(tag, attrs, ...kids) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat(9)) {
    if (kid === null || kid === undefined || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}
function cookie(name) {
  const m = document.cookie.split("; ").find(c => c.startsWith(name + "="));
  return m ? decodeURIComponent(m.slice(name.length + 1)) : "";
}
// this console's CSRF cookie (named per port: browsers share cookies between the ports of one host)
const CSRF_COOKIE = (document.querySelector('meta[name="rmqd-csrf-cookie"]') || {}).content || "rmqd_csrf";
async function api(path, opts) {
  opts = opts || {};
  const init = { method: opts.method || "GET", headers: {}, credentials: "same-origin" };
  if (init.method !== "GET") {
    init.headers["X-CSRF-Token"] = cookie(CSRF_COOKIE);
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(opts.body || {});
  }
  const r = await fetch(path, init);
  let data = null;
  try { data = await r.json(); } catch (e) { data = { error: "HTTP " + r.status }; }
  if (!r.ok) { const err = new Error((data && data.error) || ("HTTP " + r.status)); err.status = r.status; throw err; }
  return data;
}
const enc = encodeURIComponent;
function fmtTime(ms) {
  if (!ms || ms <= 0) return "-";
  const d = new Date(Number(ms)), p = n => String(n).padStart(2, "0");
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())} ${p(d.getHours())}:${p(d.getMinutes())}:${p(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, "0")}`;
}
function toLocalInput(ms) {
  const d = new Date(ms - new Date(ms).getTimezoneOffset() * 60000);
  return d.toISOString().slice(0, 19);
}
function fromLocalInput(v) { return v ? new Date(v).getTime() : 0; }
function permText(p) { return (p & 4 ? "R" : "-") + (p & 2 ? "W" : "-") + (p & 1 ? "X" : "-"); }
function link(href, text, attrs) { return h("a", Object.assign({ href, "data-link": true }, attrs || {}), text); }
function errorBox(e) { return h("div", { class: "error", role: "alert" }, String(e.message || e)); }
function table(headers, rows, attrs) {
  return h("table", attrs || { class: "list" },
    h("thead", {}, h("tr", {}, headers.map(x => h("th", { class: /^#|Offset|Lag|Count|TPS|Size|Queue/.test(x) ? "num" : null }, x)))),
    h("tbody", {}, rows));
}
function mutating(el) { if (S.session.readOnly) { el.disabled = true; el.title = "read-only console"; } return el; }
function setPage(name, ...kids) {
  main.replaceChildren(...kids);
  main.dataset.page = name;
  document.querySelectorAll("#nav a").forEach(a => a.classList.toggle("active", a.dataset.nav === navOf(name)));
}
function navOf(page) {
  return { topic: "topics", group: "groups", broker: "overview", message: "messages", tail: "topics",
           feature: "features" }[page] || page;
}
// data-ready-ms: milliseconds from the navigation start to this render (what a user waits for a page)
function ready() { main.dataset.readyMs = String(Math.round(performance.now())); main.dataset.ready = "1"; }
function nothing(text) { return h("div", { class: "empty", id: "nothing-found" }, text); }
function go(url) { history.pushState({}, "", url); route(); }
function qs() { return new URLSearchParams(location.search); }
function pager(data, hrefOf) {
  return h("div", { class: "toolbar pager" },
    data.page > 1 ? link(hrefOf(data.page - 1), "‹ previous", { id: "prev-page" }) : h("span", { class: "muted" }, "‹ previous"),
    h("span", { id: "page-info" }, `page ${data.page} of ${data.pages} · ${data.total} total`),
    data.page < data.pages ? link(hrefOf(data.page + 1), "next ›", { id: "next-page" }) : h("span", { class: "muted" }, "next ›"));
}

// ------------------------------------------------------------------ pages: cluster
function replicationText(b) {
  if (b.lagBytes !== undefined) {
    const kib = (b.lagBytes / 1024).toFixed(1);
    return b.lagMillis !== undefined ? `lag ${kib} KiB, ${b.lagMillis} ms` : `lag ${kib} KiB`;
  }
  return b.inSyncSlaves !== undefined ? `${b.inSyncSlaves} slave(s) in sync` : "";
}
async function pageOverview() {
  setPage("overview", h("h1", {}, "Cluster"));
  const d = await api("/api/overview");
  const rows = d.brokers.map(b => h("tr", { "data-broker": b.brokerName },
    h("td", {}, b.cluster), h("td", {}, b.brokerName), h("td", { class: "num" }, b.brokerId),
    h("td", {}, link("/brokers/" + enc(b.addr), b.addr)), h("td", {}, b.version || ""),
    h("td", {}, b.putTps || ""), h("td", {}, b.getTransferredTps || ""),
    h("td", { class: "num" }, b.msgPutTotalTodayNow || ""), h("td", { class: "num" }, b.msgGetTotalTodayNow || ""),
    h("td", { class: "replication" }, replicationText(b)),
    h("td", {}, b.error ? h("span", { class: "error" }, b.error) : "")));
  main.append(h("p", { class: "muted" }, `name server ${d.namesrv} · ${d.mode} view · clusters: ${d.clusters.join(", ")}`),
    table(["Cluster", "Broker", "#ID", "Address", "Version", "Put TPS", "Get TPS", "Put today", "Get today", "Replication", ""], rows, { class: "list", id: "brokers" }));
  ready();
}
async function pageBroker(addr) {
  setPage("broker", h("h1", {}, "Broker " + addr));
  const d = await api("/api/brokers/" + enc(addr));
  const filter = h("input", { id: "config-filter", placeholder: "filter settings" });
  const kv = obj => Object.keys(obj).sort().map(k => h("tr", { "data-key": k }, h("td", {}, k), h("td", {}, String(obj[k]))));
  const cfg = table(["Setting", "Value"], kv(d.config), { class: "list kv", id: "broker-config" });
  filter.addEventListener("input", () => cfg.querySelectorAll("tbody tr").forEach(tr =>
    tr.style.display = tr.dataset.key.toLowerCase().includes(filter.value.toLowerCase()) ? "" : "none"));
  main.append(h("h2", {}, "Runtime"), table(["Name", "Value"], kv(d.runtime), { class: "list kv", id: "broker-runtime" }),
    h("h2", {}, "Configuration"), filter, cfg);
  ready();
}

// ------------------------------------------------------------------ pages: topics
async function pageTopics() {
  const q = qs(), term = q.get("q") || "", kind = q.get("kind") || "all", page = q.get("page") || "1";
  const input = h("input", { id: "topic-q", value: term, placeholder: "search topics" });
  const sel = h("select", { id: "topic-kind" }, ["all", "normal", "retry", "dlq", "system"].map(k => h("option", { value: k, selected: k === kind }, k)));
  const form = h("form", { class: "inline", id: "topic-search", onsubmit: e => { e.preventDefault(); go(`/topics?q=${enc(input.value)}&kind=${enc(sel.value)}`); } },
    input, sel, h("button", { type: "submit" }, "Search"),
    mutating(h("button", { type: "button", id: "create-topic", onclick: () => showCreate() }, "Create topic")));
  const createBox = h("div", {});
  setPage("topics", h("h1", {}, "Topics"), form, createBox);
  function showCreate() {
    const name = h("input", { id: "new-topic", placeholder: "topic name", required: true });
    const rq = h("input", { id: "new-read", type: "number", value: "4", min: "1" }), wq = h("input", { id: "new-write", type: "number", value: "4", min: "1" });
    const msg = h("div", {});
    createBox.replaceChildren(h("form", { class: "panel inline", id: "topic-form", onsubmit: async e => {
      e.preventDefault();
      try { await api("/api/topics", { method: "POST", body: { topic: name.value, readQueueNums: +rq.value, writeQueueNums: +wq.value, perm: 6 } });
            go("/topics/" + enc(name.value)); } catch (err) { msg.replaceChildren(errorBox(err)); }
    } }, "Name", name, "read queues", rq, "write queues", wq, h("button", { type: "submit", class: "primary", id: "create-submit" }, "Create"), msg));
  }
  const d = await api(`/api/topics?q=${enc(term)}&kind=${enc(kind)}&page=${enc(page)}&size=20`);
  if (!d.items.length) { main.append(nothing(term ? `No topic matches “${term}”.` : "No topics.")); ready(); return; }
  const rows = d.items.map(t => h("tr", { "data-topic": t.topic },
    h("td", {}, link("/topics/" + enc(t.topic), t.topic)), h("td", {}, t.kind),
    h("td", { class: "num" }, t.readQueueNums ?? ""), h("td", { class: "num" }, t.writeQueueNums ?? ""),
    h("td", {}, t.perm !== undefined ? permText(t.perm) : ""), h("td", {}, (t.brokers || []).join(", "))));
  main.append(table(["Topic", "Kind", "Read queues", "Write queues", "Perm", "Brokers"], rows, { class: "list", id: "topics" }),
    pager(d, p => `/topics?q=${enc(term)}&kind=${enc(kind)}&page=${p}`));
  ready();
}
async function pageTopic(name) {
  setPage("topic", h("h1", {}, "Topic " + name));
  const d = await api("/api/topics/" + enc(name));
  const qrows = d.queues.map(x => h("tr", {}, h("td", {}, x.broker), h("td", { class: "num" }, x.queueId),
    h("td", { class: "num" }, x.minOffset), h("td", { class: "num" }, x.maxOffset), h("td", {}, fmtTime(x.lastUpdateTimestamp))));
  const body = h("textarea", { id: "send-body", rows: 3, cols: 60 }, '{"hello": "rmqd"}');
  const tags = h("input", { id: "send-tags", placeholder: "tags" }), keys = h("input", { id: "send-keys", placeholder: "keys" });
  const sendRes = h("div", { id: "send-result" });
  const rq = h("input", { id: "upd-read", type: "number", value: d.readQueueNums }), wq = h("input", { id: "upd-write", type: "number", value: d.writeQueueNums });
  const perm = h("select", { id: "upd-perm" }, [[6, "RW-"], [4, "R--"], [2, "-W-"]].map(([v, t]) => h("option", { value: v, selected: v === d.perm }, t)));
  const updRes = h("div", { id: "update-result" });
  main.append(
    h("div", { class: "toolbar" }, link(`/messages?topic=${enc(name)}`, "Messages"), link("/tail/" + enc(name), "Live tail", { id: "tail-link" }),
      link(`/search?topic=${enc(name)}`, "Search"), h("span", { class: "muted", id: "topic-count" }, `${d.messages} messages stored`)),
    h("h2", {}, "Queues"), table(["Broker", "Queue", "Min offset", "Max offset", "Last stored"], qrows, { class: "list", id: "queues" }),
    h("h2", {}, "Consumer groups"), d.groups.length ? h("ul", { id: "topic-groups" }, d.groups.map(g => h("li", {}, link("/groups/" + enc(g), g)))) : nothing("No consumer group has consumed this topic."),
    h("h2", {}, "Send a test message"),
    h("form", { class: "panel", id: "send-form", onsubmit: async e => {
      e.preventDefault();
      try { const r = await api(`/api/topics/${enc(name)}/send`, { method: "POST", body: { body: body.value, tags: tags.value, keys: keys.value } });
            sendRes.replaceChildren(h("div", { class: "ok" }, `${r.status}: `, link(`/messages/${enc(r.msgId)}?topic=${enc(name)}`, r.msgId), ` (queue ${r.queueId}, offset ${r.queueOffset})`));
      } catch (err) { sendRes.replaceChildren(errorBox(err)); }
    } }, body, h("div", { class: "toolbar" }, tags, keys, mutating(h("button", { type: "submit", class: "primary", id: "send-btn" }, "Send"))), sendRes),
    h("h2", {}, "Update"),
    h("form", { class: "panel inline", id: "update-form", onsubmit: async e => {
      e.preventDefault();
      try { await api("/api/topics/" + enc(name), { method: "POST", body: { readQueueNums: +rq.value, writeQueueNums: +wq.value, perm: +perm.value } });
            updRes.replaceChildren(h("span", { class: "ok" }, "updated")); } catch (err) { updRes.replaceChildren(errorBox(err)); }
    } }, "read queues", rq, "write queues", wq, "perm", perm, mutating(h("button", { type: "submit", id: "update-btn" }, "Update")), updRes),
    h("div", { class: "toolbar" }, mutating(h("button", { type: "button", class: "danger", id: "delete-btn", onclick: async () => {
      if (!confirm(`Delete topic ${name} from every broker and the name servers?`)) return;
      try { await api(`/api/topics/${enc(name)}/delete`, { method: "POST" }); go("/topics"); } catch (err) { updRes.replaceChildren(errorBox(err)); }
    } }, "Delete topic"))),
    h("h2", {}, "Route"), h("pre", { id: "route" }, JSON.stringify(d.route, null, 2)));
  ready();
}

// ------------------------------------------------------------------ pages: groups
async function pageGroups() {
  const q = qs(), term = q.get("q") || "", page = q.get("page") || "1";
  const input = h("input", { id: "group-q", value: term, placeholder: "search groups" });
  setPage("groups", h("h1", {}, "Consumer groups"),
    h("form", { class: "inline", id: "group-search", onsubmit: e => { e.preventDefault(); go(`/groups?q=${enc(input.value)}`); } }, input, h("button", { type: "submit" }, "Search")));
  const d = await api(`/api/groups?q=${enc(term)}&page=${enc(page)}&size=20`);
  if (!d.items.length) { main.append(nothing(term ? `No consumer group matches “${term}”.` : "No consumer groups.")); ready(); return; }
  const rows = d.items.map(g => h("tr", { "data-group": g.group }, h("td", {}, link("/groups/" + enc(g.group), g.group)),
    h("td", { class: "num" }, g.online), h("td", {}, g.consumeType || "OFFLINE"), h("td", {}, g.messageModel || ""),
    h("td", { class: "num" }, g.consumeTps), h("td", { class: "num lag" }, g.lag)));
  main.append(table(["Group", "Count", "Type", "Model", "TPS", "Lag"], rows, { class: "list", id: "groups" }),
    pager(d, p => `/groups?q=${enc(term)}&page=${p}`));
  ready();
}
function lagChart(samples) {
  const W = 640, H = 160, P = 30;
  const svg = document.createElementNS("http://www.w3.org/2000/svg", "svg");
  svg.setAttribute("class", "chart"); svg.setAttribute("id", "lag-chart");
  svg.setAttribute("width", W); svg.setAttribute("height", H); svg.setAttribute("viewBox", `0 0 ${W} ${H}`);
  const txt = (x, y, s) => { const t = document.createElementNS(svg.namespaceURI, "text"); t.setAttribute("x", x); t.setAttribute("y", y); t.textContent = s; svg.append(t); };
  if (!samples.length) { txt(P, H / 2, "no samples yet"); return svg; }
  const t0 = samples[0].t, t1 = Math.max(samples[samples.length - 1].t, t0 + 1), max = Math.max(1, ...samples.map(s => s.lag));
  const pts = samples.map(s => `${(P + (s.t - t0) / (t1 - t0) * (W - 2 * P)).toFixed(1)},${(H - P - s.lag / max * (H - 2 * P)).toFixed(1)}`);
  const pl = document.createElementNS(svg.namespaceURI, "polyline"); pl.setAttribute("points", pts.join(" ")); svg.append(pl);
  svg.dataset.points = String(samples.length);
  txt(4, P, String(max)); txt(4, H - P, "0"); txt(P, H - 8, fmtTime(t0).slice(11, 19)); txt(W - P - 50, H - 8, fmtTime(t1).slice(11, 19));
  return svg;
}
async function pageGroup(name) {
  setPage("group", h("h1", {}, "Consumer group " + name));
  const [d, hist] = await Promise.all([api("/api/groups/" + enc(name)), api(`/api/groups/${enc(name)}/lag-history`)]);
  const qrows = d.queues.map(x => h("tr", {}, h("td", {}, link("/topics/" + enc(x.topic), x.topic)), h("td", {}, x.broker), h("td", { class: "num" }, x.queueId),
    h("td", { class: "num" }, x.brokerOffset), h("td", { class: "num" }, x.consumerOffset), h("td", { class: "num" }, x.lag), h("td", {}, fmtTime(x.lastTimestamp))));
  const info = h("pre", { id: "running-info", hidden: true });
  const crows = d.connections.map(c => h("tr", {}, h("td", {}, c.clientId), h("td", {}, c.clientAddr), h("td", {}, c.language), h("td", {}, String(c.version)),
    h("td", {}, h("button", { type: "button", class: "running-info-btn", onclick: async () => {
      info.hidden = false; info.textContent = "loading…";
      try { const r = await api(`/api/groups/${enc(name)}/clients/${enc(c.clientId)}/running-info`); info.textContent = JSON.stringify(r.info || r.text, null, 2); }
      catch (err) { info.textContent = "error: " + err.message; }
    } }, "Running info"))));
  const topics = [...new Set(d.queues.map(x => x.topic).concat(Object.keys(d.subscriptions)))].filter(t => !t.startsWith("%"));
  const topicSel = h("select", { id: "reset-topic" }, topics.map(t => h("option", { value: t }, t)));
  const when = h("input", { id: "reset-time", type: "datetime-local", step: "1", value: toLocalInput(Date.now() - 3600000) });
  const res = h("div", { id: "reset-result" });
  const showRes = r => res.replaceChildren(h("div", { class: "ok" }, `offsets of ${r.topic}: ` + r.offsets.map(o => `${o.broker}/${o.queueId}→${o.offset}`).join(", ")));
  main.append(
    h("p", {}, h("strong", { id: "group-lag" }, `Lag ${d.lag}`), ` · ${d.consumeType || "offline"} ${d.messageModel || ""} · `, link(`/dlq?group=${enc(name)}`, "dead-letter queue")),
    h("h2", {}, "Lag trend"), lagChart(hist.samples),
    h("h2", {}, "Lag per queue"), d.queues.length ? table(["Topic", "Broker", "Queue", "Broker offset", "Consumer offset", "Lag", "Last consumed"], qrows, { class: "list", id: "group-queues" }) : nothing("This group has no committed offsets."),
    h("h2", {}, "Connections"), d.connections.length ? table(["Client", "Address", "Language", "Version", ""], crows, { class: "list", id: "connections" }) : nothing("No consumer of this group is online."), info,
    h("h2", {}, "Subscriptions"), h("pre", { id: "subscriptions" }, JSON.stringify(d.subscriptions, null, 2)),
    h("h2", {}, "Reset offsets"),
    h("div", { class: "panel" }, h("div", { class: "toolbar" }, "topic", topicSel, "to the message stored nearest to", when,
      mutating(h("button", { type: "button", id: "reset-btn", onclick: async () => {
        try { showRes(await api(`/api/groups/${enc(name)}/reset-offset`, { method: "POST", body: { topic: topicSel.value, timestamp: fromLocalInput(when.value) } })); }
        catch (err) { res.replaceChildren(errorBox(err)); } } }, "Reset")),
      mutating(h("button", { type: "button", id: "skip-btn", onclick: async () => {
        try { showRes(await api(`/api/groups/${enc(name)}/skip-backlog`, { method: "POST", body: { topic: topicSel.value } })); }
        catch (err) { res.replaceChildren(errorBox(err)); } } }, "Skip backlog"))), res));
  ready();
}

// ------------------------------------------------------------------ pages: producers
async function pageProducers() {
  const q = qs(), t = h("input", { id: "prod-topic", value: q.get("topic") || "", placeholder: "topic" }), g = h("input", { id: "prod-group", value: q.get("group") || "", placeholder: "producer group" });
  setPage("producers", h("h1", {}, "Producers"),
    h("form", { class: "inline", id: "producer-form", onsubmit: e => { e.preventDefault(); go(`/producers?topic=${enc(t.value)}&group=${enc(g.value)}`); } }, t, g, h("button", { type: "submit" }, "Show")));
  if (q.get("topic") && q.get("group")) {
    const d = await api(`/api/producers?topic=${enc(q.get("topic"))}&group=${enc(q.get("group"))}`);
    main.append(d.connections.length ? table(["Client", "Address", "Language", "Version", "Broker"], d.connections.map(c =>
      h("tr", {}, h("td", {}, c.clientId), h("td", {}, c.clientAddr), h("td", {}, c.language), h("td", {}, String(c.version)), h("td", {}, c.broker))), { class: "list", id: "producers" })
      : nothing(`No producer of group ${q.get("group")} is connected.`));
  }
  ready();
}

// ------------------------------------------------------------------ pages: messages
function messageRows(msgs, topic) {
  return msgs.map(m => h("tr", { "data-msgid": m.msgId }, h("td", {}, fmtTime(m.storeTimestamp)),
    h("td", {}, link(`/messages/${enc(m.msgId)}?topic=${enc(m.topic || topic)}`, m.msgId)), h("td", {}, m.uniqKey), h("td", {}, m.tags), h("td", {}, m.keys),
    h("td", { class: "num" }, `${m.broker}/${m.queueId}`), h("td", { class: "num" }, m.queueOffset), h("td", { class: "num" }, m.bodySize),
    h("td", { class: "preview" }, m.binary ? "(binary)" : m.preview)));
}
const MSG_HEAD = ["Stored", "Message id", "Unique key", "Tags", "Keys", "Queue", "Offset", "Size", "Body"];
async function pageMessages() {
  const q = qs(), now = Date.now();
  const mode = q.get("key") !== null ? "key" : (q.get("id") !== null ? "id" : "time");
  const topic = h("input", { id: "msg-topic", value: q.get("topic") || "", placeholder: "topic" });
  const begin = h("input", { id: "msg-begin", type: "datetime-local", step: "1", value: toLocalInput(+(q.get("begin") || now - 3600000)) });
  const end = h("input", { id: "msg-end", type: "datetime-local", step: "1", value: toLocalInput(+(q.get("end") || now + 60000)) });
  const key = h("input", { id: "msg-key", value: q.get("key") || "", placeholder: "key" });
  const mid = h("input", { id: "msg-id", value: q.get("id") || "", placeholder: "message id or unique key", size: 40 });
  const tabs = h("div", { class: "tabs toolbar" }, ["time", "key", "id"].map(m => h("button", { type: "button", id: "tab-" + m, class: m === mode ? "on" : null,
    onclick: () => go(m === "time" ? `/messages?topic=${enc(topic.value)}` : m === "key" ? `/messages?topic=${enc(topic.value)}&key=` : `/messages?topic=${enc(topic.value)}&id=`) }, "by " + m)));
  const fields = mode === "time" ? [topic, "from", begin, "to", end] : mode === "key" ? [topic, key] : [mid, topic];
  setPage("messages", h("h1", {}, "Messages"), tabs, h("form", { class: "inline", id: "msg-form", onsubmit: e => {
    e.preventDefault();
    if (mode === "time") go(`/messages?topic=${enc(topic.value)}&begin=${fromLocalInput(begin.value)}&end=${fromLocalInput(end.value)}`);
    else if (mode === "key") go(`/messages?topic=${enc(topic.value)}&key=${enc(key.value)}`);
    else go(`/messages/${enc(mid.value.trim())}?topic=${enc(topic.value)}`);
  } }, fields, h("button", { type: "submit", class: "primary", id: "msg-search" }, "Search")));
  const t = q.get("topic");
  if (t && mode !== "id" && (mode === "time" || q.get("key"))) {
    const url = mode === "key" ? `/api/messages?topic=${enc(t)}&key=${enc(q.get("key"))}` : `/api/messages?topic=${enc(t)}&begin=${q.get("begin") || now - 3600000}&end=${q.get("end") || now + 60000}`;
    const d = await api(url);
    if (!d.messages.length) main.append(nothing(mode === "key" ? `Nothing found: no message of ${t} has key “${q.get("key")}”.` : `Nothing found: ${t} has no message stored between ${fmtTime(d.begin)} and ${fmtTime(d.end)}.`));
    else main.append(h("p", { class: "muted", id: "msg-count" }, `${d.messages.length} messages, newest first` + (d.truncated ? " (more exist: narrow the time range)" : "")),
      table(MSG_HEAD, messageRows(d.messages, t), { class: "list", id: "messages" }));
  }
  ready();
}
function hexDump(bytes) {
  const out = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = bytes.slice(i, i + 16);
    out.push(i.toString(16).padStart(8, "0") + "  " + Array.from(row, b => b.toString(16).padStart(2, "0")).join(" ").padEnd(48) + "  " +
      Array.from(row, b => (b >= 32 && b < 127 ? String.fromCharCode(b) : ".")).join(""));
  }
  return out.join("\n");
}
async function pageMessage(id) {
  const topic = qs().get("topic") || "";
  setPage("message", h("h1", {}, "Message " + id));
  const m = await api(`/api/messages/${enc(id)}?topic=${enc(topic)}`);
  const bytes = Uint8Array.from(atob(m.body), c => c.charCodeAt(0));
  let text = null; try { text = new TextDecoder("utf-8", { fatal: true }).decode(bytes); } catch (e) { text = null; }
  let json = null; if (text !== null) { try { json = JSON.stringify(JSON.parse(text), null, 2); } catch (e) { json = null; } }
  const pre = h("pre", { id: "msg-body" });
  const views = { json: () => json, text: () => text, hex: () => hexDump(bytes) };
  const tabs = h("div", { class: "tabs toolbar" });
  const show = v => { pre.textContent = views[v](); pre.dataset.view = v; tabs.querySelectorAll("button").forEach(b => b.classList.toggle("on", b.dataset.view === v)); };
  for (const v of ["json", "text", "hex"]) tabs.append(h("button", { type: "button", id: "view-" + v, "data-view": v, disabled: views[v]() === null, onclick: () => show(v) }, v.toUpperCase()));
  const rows = [["Topic", link("/topics/" + enc(m.topic), m.topic)], ["Message id", m.msgId], ["Unique key", m.uniqKey], ["Tags", m.tags], ["Keys", m.keys],
    ["Queue", `${m.broker}/${m.queueId}`], ["Queue offset", m.queueOffset], ["CommitLog offset", m.commitLogOffset], ["Born", `${fmtTime(m.bornTimestamp)} from ${m.bornHost}`],
    ["Stored", `${fmtTime(m.storeTimestamp)} on ${m.storeHost}`], ["Reconsume times", m.reconsumeTimes], ["Body size", `${m.bodySize} bytes`]];
  const group = h("input", { id: "resend-group", placeholder: "consumer group", list: "resend-groups" });
  const res = h("div", { id: "resend-result" });
  main.append(table(["Field", "Value"], rows.map(([k, v]) => h("tr", {}, h("td", {}, k), h("td", {}, v))), { class: "list kv", id: "msg-fields" }),
    h("h2", {}, "Properties"), table(["Name", "Value"], Object.keys(m.properties).sort().map(k => h("tr", {}, h("td", {}, k), h("td", {}, m.properties[k]))), { class: "list kv", id: "msg-props" }),
    h("h2", {}, "Body"), h("div", { class: "toolbar" }, tabs, h("a", { id: "download", href: `/api/messages/${enc(id)}/raw?topic=${enc(topic)}`, download: `${id}.bin` }, "Download raw")), pre,
    h("h2", {}, "Resend to a consumer group"),
    h("div", { class: "panel toolbar" }, group, mutating(h("button", { type: "button", id: "resend-btn", onclick: async () => {
      try { const r = await api(`/api/messages/${enc(id)}/resend`, { method: "POST", body: { group: group.value, topic } });
            res.replaceChildren(h("div", { class: "ok" }, `consumed by ${r.clientId}: ` + JSON.stringify(r.result))); } catch (err) { res.replaceChildren(errorBox(err)); }
    } }, "Resend")), res));
  show(json !== null ? "json" : text !== null ? "text" : "hex");
  ready();
}

// ------------------------------------------------------------------ pages: DLQ
async function pageDlq() {
  const q = qs(), g = h("input", { id: "dlq-group", value: q.get("group") || "", placeholder: "consumer group" });
  setPage("dlq", h("h1", {}, "Dead-letter queue"),
    h("form", { class: "inline", id: "dlq-form", onsubmit: e => { e.preventDefault(); go(`/dlq?group=${enc(g.value)}`); } }, g, h("button", { type: "submit" }, "Browse")));
  const group = q.get("group");
  if (group) {
    const d = await api(`/api/dlq/${enc(group)}`);
    const res = h("div", { id: "dlq-result" });
    if (!d.messages.length) main.append(nothing(`Nothing found: the dead-letter queue of ${group} is empty.`));
    else {
      const rows = messageRows(d.messages, d.topic);
      rows.forEach((tr, i) => tr.append(h("td", {}, mutating(h("button", { type: "button", class: "dlq-resend", onclick: async () => {
        try { const r = await api(`/api/dlq/${enc(group)}/resend`, { method: "POST", body: { msgId: d.messages[i].msgId } });
              res.replaceChildren(h("div", { class: "ok" }, `resent to ${r.topic} as ${r.msgId}`)); } catch (err) { res.replaceChildren(errorBox(err)); }
      } }, "Resend")))));
      main.append(table(MSG_HEAD.concat([""]), rows, { class: "list", id: "dlq-messages" }), res);
    }
  }
  ready();
}

// ------------------------------------------------------------------ pages: live tail
async function pageTail(topic) {
  const status = h("span", { id: "tail-status" }, "connecting");
  const count = h("span", { id: "tail-count" }, "0");
  const body = h("tbody", { id: "tail-rows" });
  let es = null, positions = null, paused = false, n = 0;
  const btn = h("button", { type: "button", id: "tail-pause", onclick: () => { paused ? open() : pause(); } }, "Pause");
  function open() {
    paused = false; btn.textContent = "Pause";
    es = new EventSource(`/api/topics/${enc(topic)}/tail` + (positions ? "?from=" + enc(JSON.stringify(positions)) : ""));
    es.addEventListener("open", () => { status.textContent = "live"; });
    es.addEventListener("pos", e => { positions = JSON.parse(e.data); status.textContent = "live"; });
    es.addEventListener("message", e => {
      const msgs = JSON.parse(e.data);
      for (const tr of messageRows(msgs, topic)) body.prepend(tr);
      while (body.children.length > 500) body.lastChild.remove();
      n += msgs.length; count.textContent = String(n);
    });
    es.addEventListener("failure", e => { status.textContent = "error: " + JSON.parse(e.data).error; });
    es.onerror = () => { if (!paused) status.textContent = "reconnecting"; };
  }
  function pause() { paused = true; if (es) es.close(); es = null; status.textContent = "paused"; btn.textContent = "Resume"; }
  S.cleanup.push(() => { if (es) es.close(); });
  setPage("tail", h("h1", {}, "Live tail of " + topic),
    h("div", { class: "toolbar" }, btn, "status:", status, "· received:", count, link("/topics/" + enc(topic), "topic")),
    h("table", { class: "list", id: "tail" }, h("thead", {}, h("tr", {}, MSG_HEAD.map(x => h("th", {}, x)))), body));
  open();
  ready();
}

// ------------------------------------------------------------------ pages: search
async function pageSearch() {
  const q = qs(), now = Date.now();
  const topic = h("input", { id: "search-topic", value: q.get("topic") || "", placeholder: "topic" });
  const text = h("input", { id: "search-q", value: q.get("q") || "", placeholder: "text to find" });
  const field = h("select", { id: "search-field" }, ["all", "body", "keys", "tags", "properties"].map(f => h("option", { value: f, selected: f === (q.get("field") || "all") }, f)));
  const mode = h("select", { id: "search-mode" }, [["contains", "contains"], ["not_contains", "does not contain"]].map(([v, t]) => h("option", { value: v, selected: v === (q.get("mode") || "contains") }, t)));
  const begin = h("input", { id: "search-begin", type: "datetime-local", step: "1", value: toLocalInput(+(q.get("begin") || now - 86400000)) });
  const end = h("input", { id: "search-end", type: "datetime-local", step: "1", value: toLocalInput(+(q.get("end") || now + 60000)) });
  setPage("search", h("h1", {}, "Search message bodies and properties"),
    h("form", { class: "inline", id: "search-form", onsubmit: e => { e.preventDefault();
      go(`/search?topic=${enc(topic.value)}&q=${enc(text.value)}&field=${field.value}&mode=${mode.value}&begin=${fromLocalInput(begin.value)}&end=${fromLocalInput(end.value)}`); } },
      topic, field, mode, text, "from", begin, "to", end, h("button", { type: "submit", class: "primary", id: "search-btn" }, "Search")));
  if (!q.get("topic") || !q.get("q")) { ready(); return; }
  const bar = h("progress", { id: "search-progress", max: 1, value: 0 });
  const info = h("span", { id: "search-info" }, "starting");
  const out = h("div", { id: "search-results" });
  main.append(h("div", { class: "toolbar" }, bar, info), out);
  let job = await api(`/api/search?topic=${enc(q.get("topic"))}&q=${enc(q.get("q"))}&field=${enc(q.get("field") || "all")}&mode=${enc(q.get("mode") || "contains")}&begin=${q.get("begin") || 0}&end=${q.get("end") || 0}`);
  let stop = false; S.cleanup.push(() => { stop = true; });
  while (!stop) {
    bar.max = Math.max(1, job.total); bar.value = job.scanned;
    info.textContent = (job.state === "queued" ? "waiting for a free search worker · " : "") +
      `scanned ${job.scanned} of ${job.total} · ${job.matches.length} found` + (job.capped ? " (first 500 shown)" : "") + (job.done ? " · done" : "");
    if (job.done) {
      if (job.error) out.replaceChildren(errorBox(job.error));
      else out.replaceChildren(job.matches.length ? table(MSG_HEAD, messageRows(job.matches, job.topic), { class: "list", id: "search-matches" })
        : nothing(`Nothing found: no message of ${job.topic} in that range ${job.mode === "not_contains" ? "lacks" : "contains"} “${job.q}”.`));
      break;
    }
    await new Promise(r => setTimeout(r, 200));
    job = await api("/api/search/" + job.id);
  }
  ready();
}

// ------------------------------------------------------------------ pages: features (extension point)
// A feature's status: {summary: {label: value}, tables: [{id, title, columns, rows}]} (other dicts as JSON).
function featureBlock(name, st) {
  if (!st) return h("div", { class: "empty", id: "feature-" + name }, `${name}: not available on this cluster.`);
  if (!st.tables) return h("pre", { id: "feature-" + name }, JSON.stringify(st, null, 2));
  const box = h("section", { id: "feature-" + name });
  const dl = h("dl", { class: "summary" });
  for (const [k, v] of Object.entries(st.summary || {})) dl.append(h("dt", {}, k), h("dd", {}, String(v)));
  box.append(dl);
  for (const t of st.tables) {
    box.append(h("h3", {}, t.title));
    if (!t.rows.length) { box.append(nothing(`No ${t.title.toLowerCase()}.`)); continue; }
    box.append(h("table", { id: t.id },
      h("thead", {}, h("tr", {}, ...t.columns.map(c => h("th", {}, c)))),
      h("tbody", {}, ...t.rows.map(r => h("tr", {}, ...r.map(c => h("td", {}, String(c))))))));
  }
  return box;
}
async function pageFeatures(only) {
  setPage(only ? "feature" : "features", h("h1", {}, only ? `Feature: ${only}` : "Broker features"));
  const d = await api("/api/features");
  const names = only ? [only] : d.builtin.concat(Object.keys(d.features).filter(k => !d.builtin.includes(k)));
  for (const name of names) {
    main.append(h("h2", {}, only ? name : h("a", { href: `/features/${encodeURIComponent(name)}`, "data-link": "" }, name)),
                featureBlock(name, d.features[name]));
  }
  ready();
}

// ------------------------------------------------------------------ pages: access control 2.0 (users, ACLs)
async function pageAccess() {
  setPage("access", h("h1", {}, "Access control"));
  const [u, a] = await Promise.all([api("/api/auth/users"), api("/api/auth/acls")]);
  const res = h("div", { id: "access-result" });
  const act = fn => async () => { try { await fn(); pageAccess(); } catch (err) { res.replaceChildren(errorBox(err)); } };
  const urows = u.users.map(x => h("tr", { "data-user": x.username },
    h("td", {}, x.username), h("td", {}, x.userType), h("td", {}, x.userStatus),
    h("td", {}, mutating(h("button", { type: "button", class: "user-toggle", onclick: act(() => api("/api/auth/users",
      { method: "POST", body: { username: x.username, userStatus: x.userStatus === "disable" ? "enable" : "disable" } })) },
      x.userStatus === "disable" ? "Enable" : "Disable")),
      mutating(h("button", { type: "button", class: "user-delete", onclick: act(() => {
        if (!confirm(`Delete user ${x.username} and its ACL?`)) throw new Error("not deleted");
        return api(`/api/auth/users/${enc(x.username)}/delete`, { method: "POST" }); }) }, "Delete")))));
  const nu = h("input", { id: "new-user", placeholder: "username" });
  const np = h("input", { id: "new-password", type: "password", placeholder: "password" });
  const nt = h("select", { id: "new-user-type" }, ["Normal", "Super"].map(t => h("option", { value: t }, t)));
  const arows = a.entries.map(e => h("tr", { "data-subject": e.subject, "data-resource": e.resource },
    h("td", {}, e.subject), h("td", {}, e.policyType), h("td", {}, e.resource), h("td", {}, e.actions.join(", ")),
    h("td", {}, e.sourceIps.join(", ") || "any"), h("td", {}, e.decision),
    h("td", {}, mutating(h("button", { type: "button", class: "acl-delete", onclick: act(() => api("/api/auth/acls/delete",
      { method: "POST", body: { subject: e.subject, resource: e.resource, policyType: e.policyType } })) }, "Delete")))));
  const f = {};
  for (const [k, ph] of [["subject", "User:name"], ["resources", "Topic:orders,Group:app-*"], ["actions", "Pub,Sub"],
                         ["sourceIps", "source IPs or CIDRs (optional)"]]) f[k] = h("input", { id: "acl-" + k, placeholder: ph });
  f.decision = h("select", { id: "acl-decision" }, ["Allow", "Deny"].map(d => h("option", { value: d }, d)));
  f.policyType = h("select", { id: "acl-policy-type" }, ["Custom", "Default"].map(d => h("option", { value: d }, d)));
  main.append(
    h("h2", {}, "Users"),
    u.users.length ? table(["User", "Type", "Status", ""], urows, { class: "list", id: "auth-users" }) : nothing("No users."),
    h("form", { class: "inline", id: "user-form", onsubmit: e => { e.preventDefault(); act(() => api("/api/auth/users",
      { method: "POST", body: { create: true, username: nu.value, password: np.value, userType: nt.value } }))(); } },
      nu, np, nt, mutating(h("button", { type: "submit" }, "Create user"))),
    h("h2", {}, "Policies"),
    a.entries.length ? table(["Subject", "Policy", "Resource", "Actions", "Source IPs", "Decision", ""], arows, { class: "list", id: "auth-acls" })
      : nothing("No ACLs."),
    h("form", { class: "inline", id: "acl-form", onsubmit: e => { e.preventDefault(); act(() => api("/api/auth/acls",
      { method: "POST", body: Object.fromEntries(Object.entries(f).map(([k, el]) => [k, el.value])) }))(); } },
      f.subject, f.resources, f.actions, f.sourceIps, f.decision, f.policyType, mutating(h("button", { type: "submit" }, "Add entries"))),
    res);
  ready();
}

// ------------------------------------------------------------------ router
const ROUTES = [
  [/^\/$/, pageOverview], [/^\/brokers\/(.+)$/, pageBroker], [/^\/topics$/, pageTopics], [/^\/topics\/(.+)$/, pageTopic],
  [/^\/groups$/, pageGroups], [/^\/groups\/(.+)$/, pageGroup], [/^\/producers$/, pageProducers], [/^\/messages$/, pageMessages],
  [/^\/messages\/(.+)$/, pageMessage], [/^\/dlq$/, pageDlq], [/^\/tail\/(.+)$/, pageTail], [/^\/search$/, pageSearch],
  [/^\/features$/, () => pageFeatures()], [/^\/features\/(.+)$/, pageFeatures],
  [/^\/access$/, pageAccess],
];
async function route() {
  S.cleanup.splice(0).forEach(f => { try { f(); } catch (e) { /* page gone */ } });
  main.dataset.ready = "0";
  const path = location.pathname;
  for (const [re, fn] of ROUTES) {
    const m = path.match(re);
    if (!m) continue;
    try { await fn(...m.slice(1).map(decodeURIComponent)); }
    catch (e) { main.append(errorBox(e)); main.dataset.ready = "1"; }
    return;
  }
  setPage("notfound", h("h1", {}, "Not found"), nothing(`There is no page at ${path}.`)); ready();
}
document.addEventListener("click", e => {
  const a = e.target.closest("a[data-link]");
  if (!a || e.ctrlKey || e.metaKey || e.shiftKey || a.target) return;
  e.preventDefault(); go(a.getAttribute("href"));
});
window.addEventListener("popstate", route);
document.getElementById("theme-toggle").addEventListener("click", () => {
  const t = document.documentElement.dataset.theme === "dark" ? "light" : "dark";
  document.documentElement.dataset.theme = t; localStorage.setItem("rmqd-theme", t);
});
(async () => {
  try { S.session = await api("/api/session"); } catch (e) { /* token page */ }
  if (S.session.readOnly) document.getElementById("badges").append(h("span", { class: "badge", id: "read-only-badge" }, "read-only"));
  route();
})();
