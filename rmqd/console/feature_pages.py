"""The console's built-in feature pages: compaction status, tiered storage and ACL accounts
(``/features/<name>``).

Each provider reads the in-process broker and answers the feature page's shape (see
``rmqd.console.extensions``): ``{"summary": {label: value}, "tables": [{"id", "title", "columns",
"rows"}]}``, or None when the broker does not run the feature. Secret keys are never read out.
"""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Optional

from rmqd.acl import permission as P
from rmqd.console import extensions

if TYPE_CHECKING:
    from rmqd.console.admin_bodies import TierStatusBody
    from rmqd.console.handles import ConsoleBroker
    from rmqd.console.view_base import JsonObject

_PERM_NAMES = {P.PUB: "PUB", P.SUB: "SUB", P.PUB | P.SUB: "PUB|SUB", P.DENY: "DENY"}


def perm_name(bits: int) -> str:
    """plain_acl.yml's spelling of a permission (``PUB|SUB``, ``DENY``, ...)."""
    return _PERM_NAMES.get(bits, str(bits))


def _when(ms: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ms / 1000)) if ms > 0 else "never"


def compaction_page(broker: "ConsoleBroker") -> Optional["JsonObject"]:
    """Per queue of every compaction topic: copied and compacted offsets, files, records, bytes, last run."""
    comp = getattr(broker.ctx.store, "compaction", None)
    if comp is None:
        return None
    rows = []
    for q in comp.status():
        rows.append([q["topic"], q["queueId"], q["minOffset"], q["copiedOffset"], q["last_compacted_offset"],
                     q["files"], q["records"], q["bytes"], q["last_bytes_before"], q["last_bytes_after"],
                     _when(q["last_run_ms"]), round(q["last_duration_ms"], 1), q["runs"], q["failures"],
                     q["last_error"]])
    cfg = comp.compaction_config
    return {
        "summary": {"enabled": cfg.enabled, "compaction topics": len(comp.compaction_topics), "queues": len(rows),
                    "schedule (ms)": cfg.schedule_interval_ms, "threads": cfg.threads,
                    "maxOffsetMapSize": cfg.max_offset_map_size},
        "tables": [{"id": "compaction-queues", "title": "Queues",
                    "columns": ["topic", "queue", "min offset", "copied to", "compacted to", "files", "records",
                                "bytes", "bytes before", "bytes after", "last run", "took ms", "runs",
                                "failures", "last error"],
                    "rows": rows}],
    }


def acl_page(broker: "ConsoleBroker") -> Optional["JsonObject"]:
    """Accounts (never their secret keys), permissions and the global white list of plain_acl.yml."""
    acl = broker.acl_manager
    if acl is None:
        return None
    state = acl.state
    rows = []
    for key, acc in sorted(state.accounts.items()):
        topics = ", ".join(f"{r}={perm_name(v)}" for r, v in sorted(acc.perms.items())
                           if not r.startswith(P.RETRY_PREFIX))
        groups = ", ".join(f"{r[len(P.RETRY_PREFIX):]}={perm_name(v)}" for r, v in sorted(acc.perms.items())
                           if r.startswith(P.RETRY_PREFIX))
        rows.append([key, "yes" if acc.admin else "no", acc.white_remote_address or "",
                     perm_name(acc.default_topic_perm), perm_name(acc.default_group_perm), topics, groups,
                     state.file_of.get(key, "")])
    return {
        "summary": {"accounts": len(rows), "files": len(state.versions),
                    "global white addresses": ", ".join(state.global_white_text) or "(none)"},
        "tables": [{"id": "acl-accounts", "title": "Accounts",
                    "columns": ["accessKey", "admin", "whiteRemoteAddress", "defaultTopicPerm",
                                "defaultGroupPerm", "topicPerms", "groupPerms", "file"],
                    "rows": rows}],
    }


TIER_QUEUE_ROWS = 200       # queue rows on the page (``rmqd admin tierStatus -t TOPIC`` shows any topic)


def tier_page_of(statuses: list[tuple[str, "TierStatusBody"]]) -> Optional["JsonObject"]:
    """The "tier" page from ``(broker name, tier status)`` pairs: ``TieredStore.status()`` in-process,
    or the body of admin code 9003 (GET_TIER_STATUS) from each broker for ``rmqd console -n``."""
    if not statuses:
        return None
    queues: list[list[object]] = []
    files: list[list[object]] = []
    errors: list[str] = []
    for name, st in statuses:
        for q in st.get("queues") or []:
            queues.append([name, q["topic"], q["queueId"], q["minOffset"], q["maxOffset"], q["committedOffset"],
                           q["bytes"], q["commitLogBytes"], q["consumeQueueBytes"], q["segments"]])
        for f in st.get("indexFiles") or []:
            files.append([name, f["beginTs"], f["state"], f["items"], _when(f["beginTime"]), _when(f["endTime"]),
                          f["bytes"]])
        if st.get("lastError"):
            errors.append(f"{name}: {st['lastError']}" if len(statuses) > 1 else str(st["lastError"]))
    one = len(statuses) == 1
    shown = queues[:TIER_QUEUE_ROWS]
    summary = {
        "backend": statuses[0][1].get("backend", "") if one else
        "; ".join(f"{n}: {st.get('backend', '')}" for n, st in statuses),
        "storage level": statuses[0][1].get("level", "") if one else
        "; ".join(f"{n}: {st.get('level', '')}" for n, st in statuses),
        "queues": len(queues) if len(shown) == len(queues) else f"{len(queues)} ({len(shown)} shown)",
        "index files": len(files),
        "uploaded index files": sum(1 for f in files if f[2] == "uploaded"),
        "messages copied since start": sum(int(st.get("copied") or 0) for _, st in statuses),
        "last error": "; ".join(errors) or "none",
    }
    return {
        "summary": summary,
        "tables": [{"id": "tier-queues", "title": "Queues",
                    "columns": ["broker", "topic", "queue", "min offset", "max offset", "committed to", "bytes",
                                "commit log bytes", "consume queue bytes", "segments"],
                    "rows": shown},
                   {"id": "tier-index-files", "title": "Index files",
                    "columns": ["broker", "file", "state", "items", "first item", "last item", "bytes"],
                    "rows": files}],
    }


def tier_page(broker: "ConsoleBroker") -> Optional["JsonObject"]:
    """Per queue the tier's offsets and size, per index file its state, items and time range."""
    tier = getattr(broker.ctx.store, "tier", None)
    if tier is None or not tier.started:
        return None
    return tier_page_of([(broker.ctx.config.brokerName, tier.status())])


def register_builtin() -> None:
    """Register the built-in pages (idempotent), and the lite and priority pages (:mod:`rmqd.console.lite_pages`,
    read from the broker's ``lite_priority`` handle)."""
    from rmqd.console import lite_pages
    extensions.register("compaction", compaction_page)
    extensions.register("tier", tier_page)
    extensions.register("acl", acl_page)
    lite_pages.register()
