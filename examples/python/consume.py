#!/usr/bin/python3
"""consume.py: an application beside webhook_inbox, with psycopg 3.

It reads the mirror through the typed views (here: Stripe subscriptions) and
executes the effects outbox: effects of the kinds it handles are claimed with
claim_effects() under a lease, done, and finished with complete_effect() under
the claim's token.  It sleeps on LISTEN webhook_inbox_effects (sent at commit
when such effects become due) and drains the outbox again on every
notification; a slow timer catches what a lost connection missed.

Connection: a libpq connection string in DATABASE_URL, else the PG*
environment variables; log in as a member of webhook_inbox_application (the
typed views and the outbox, nothing else).
  WI_KINDS       comma-separated effect kinds to execute (default: email)
  WI_WORKER      this consumer's name in the leases (default: python-<pid>)
  WI_POLL_S      fallback drain interval in seconds (default: 60)
  WI_EXIT_AFTER  exit 0 after this many effects (default: run forever)
"""
import json
import os
import select
import sys
import time

import psycopg
from psycopg.rows import dict_row

KINDS = os.environ.get("WI_KINDS", "email").split(",")
WORKER = os.environ.get("WI_WORKER", "python-%d" % os.getpid())
POLL_S = float(os.environ.get("WI_POLL_S", "60"))
EXIT_AFTER = int(os.environ.get("WI_EXIT_AFTER", "0"))


def execute(conn, effect):
    """The business action of one effect: here it reads the mirror for the
    object the effect is about and prints a line; a real one sends the
    email.  Raising gives the effect back for a retry with backoff."""
    detail = ""
    if effect["object_type"] == "subscription":
        sub = conn.execute(
            "SELECT status, customer, current_period_end"
            "  FROM webhook_inbox.stripe_subscriptions WHERE source = %s AND id = %s",
            (effect["source"], effect["object_id"])).fetchone()
        if sub:
            end = sub["current_period_end"]
            detail = " status=%s customer=%s period_end=%s" % (
                sub["status"], sub["customer"], end.isoformat() if end else "")
    print("effect %d %s %s/%s key=%s request=%s%s" % (
        effect["id"], effect["kind"], effect["object_type"], effect["object_id"],
        effect["effect_key"], json.dumps(effect["request"], sort_keys=True), detail),
        flush=True)
    return "sent"


def drain(conn, handled):
    """Claim and execute until nothing of our kinds is due; returns the
    number of effects done so far."""
    while True:
        effects = conn.execute(
            "SELECT e.*, s.name AS source"
            "  FROM webhook_inbox.claim_effects(%s, %s, 10, '30 seconds') e"
            "  LEFT JOIN webhook_inbox.source_list s ON s.id = e.source_id",
            (WORKER, KINDS)).fetchall()
        if not effects:
            return handled
        for effect in effects:
            outcome, response = "done", None
            try:
                response = execute(conn, effect)
            except Exception as err:  # the action failed: retry later, same effect
                outcome, response = "retry", str(err)
            try:
                conn.execute("SELECT webhook_inbox.complete_effect(%s, %s, %s, %s)",
                             (effect["id"], effect["claim_token"], outcome, response))
            except psycopg.errors.ObjectNotInPrerequisiteState as err:
                # the lease expired and another consumer took the effect over
                print("effect %d: %s" % (effect["id"], err), file=sys.stderr)
                continue
            if outcome == "done":
                handled += 1
                if EXIT_AFTER and handled >= EXIT_AFTER:
                    sys.exit(0)


def main():
    conn = psycopg.connect(os.environ.get("DATABASE_URL", ""), autocommit=True, row_factory=dict_row)
    woken = []
    conn.add_notify_handler(lambda n: woken.append(n.payload) if n.payload in KINDS else None)
    conn.execute("LISTEN webhook_inbox_effects")
    n = conn.execute("SELECT count(*) AS n FROM webhook_inbox.stripe_subscriptions WHERE NOT deleted").fetchone()["n"]
    print("listening for %s effects as %s; %d subscriptions mirrored" % (",".join(KINDS), WORKER, n), flush=True)
    handled = drain(conn, 0)
    next_poll = time.monotonic() + POLL_S
    while True:
        # sleep on the socket until a notification (or the fallback timer)
        ready, _, _ = select.select([conn.fileno()], [], [], max(0.0, next_poll - time.monotonic()))
        if ready:
            conn.execute("SELECT 1")    # reads the pending notifications into the handler
        if woken or time.monotonic() >= next_poll:
            woken.clear()
            handled = drain(conn, handled)
            next_poll = time.monotonic() + POLL_S


if __name__ == "__main__":
    main()
