"""SQL the end-to-end tests use to check a store from outside, with the stdlib sqlite3."""

from __future__ import annotations

# Every message reachable from the active context: items themselves, plus everything below the
# summaries in it through summary_parents (recursively) and summary_messages.
REACHABLE = """
WITH RECURSIVE reach(sid) AS (
    SELECT ci.summary_id FROM context_items AS ci
    JOIN sessions AS s ON s.session_id = ci.session_id AND s.status = 'active' AND s.session_key = :key
    WHERE ci.summary_id IS NOT NULL
  UNION
    SELECT sp.source_summary_id FROM reach CROSS JOIN summary_parents AS sp ON sp.summary_id = reach.sid
)
SELECT message_id FROM summary_messages WHERE summary_id IN (SELECT sid FROM reach)
UNION
SELECT ci.message_id FROM context_items AS ci
JOIN sessions AS s ON s.session_id = ci.session_id AND s.status = 'active' AND s.session_key = :key
WHERE ci.message_id IS NOT NULL
"""
