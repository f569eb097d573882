// consume.js: an application beside webhook_inbox, with node-postgres.
//
// It reads the mirror through the typed views (here: Stripe subscriptions)
// and executes the effects outbox: effects of the kinds it handles are
// claimed with claim_effects() under a lease, done, and finished with
// complete_effect() under the claim's token.  It sleeps on LISTEN
// webhook_inbox_effects (sent at commit when such effects become due) and
// drains the outbox again on every notification; a slow timer catches what a
// lost connection missed.
//
// Connection: the usual PG* environment variables (PGHOST, PGPORT,
// PGDATABASE, PGUSER, PGPASSWORD) or DATABASE_URL; log in as a member of
// webhook_inbox_application (the typed views and the outbox, nothing else).
//   WI_KINDS        comma-separated effect kinds to execute (default: email)
//   WI_WORKER       this consumer's name in the leases (default: node-<pid>)
//   WI_POLL_MS      fallback drain interval (default: 60000)
//   WI_EXIT_AFTER   exit 0 after this many effects (default: run forever)
'use strict';

const { Client } = require('pg');

const kinds = (process.env.WI_KINDS || 'email').split(',');
const worker = process.env.WI_WORKER || `node-${process.pid}`;
const pollMs = Number(process.env.WI_POLL_MS || 60000);
const exitAfter = Number(process.env.WI_EXIT_AFTER || 0);

const client = new Client(process.env.DATABASE_URL ? { connectionString: process.env.DATABASE_URL } : {});
let handled = 0;
let draining = null;
let again = false;

// The business action of one effect.  Here it reads the mirror for the
// object the effect is about and prints a line; a real one sends the email.
// Throwing gives the effect back for a retry with backoff.
async function execute(effect) {
  let detail = '';
  if (effect.object_type === 'subscription') {
    const { rows } = await client.query(
      `SELECT status, customer, current_period_end
         FROM webhook_inbox.stripe_subscriptions WHERE source = $1 AND id = $2`,
      [effect.source, effect.object_id]);
    if (rows.length) {
      const s = rows[0];
      detail = ` status=${s.status} customer=${s.customer}` +
        ` period_end=${s.current_period_end ? s.current_period_end.toISOString() : ''}`;
    }
  }
  console.log(`effect ${effect.id} ${effect.kind} ${effect.object_type}/${effect.object_id}` +
    ` key=${effect.effect_key} request=${JSON.stringify(effect.request, Object.keys(effect.request).sort())}${detail}`);
  return 'sent';
}

// Claim and execute until nothing of our kinds is due.
async function drain() {
  for (;;) {
    const { rows } = await client.query(
      `SELECT e.*, s.name AS source
         FROM webhook_inbox.claim_effects($1, $2, 10, '30 seconds') e
         LEFT JOIN webhook_inbox.source_list s ON s.id = e.source_id`,
      [worker, kinds]);
    if (rows.length === 0) return;
    for (const effect of rows) {
      let outcome = 'done';
      let response = null;
      try {
        response = await execute(effect);
      } catch (err) {
        outcome = 'retry';
        response = String(err && err.message);
      }
      try {
        await client.query('SELECT webhook_inbox.complete_effect($1, $2, $3, $4)',
          [effect.id, effect.claim_token, outcome, response]);
      } catch (err) {
        // the lease expired and another consumer took the effect over
        console.error(`effect ${effect.id}: ${err.message}`);
        continue;
      }
      if (outcome === 'done' && exitAfter && ++handled >= exitAfter) {
        await client.end();
        process.exit(0);
      }
    }
  }
}

// One drain at a time; a wake-up during a drain runs one more.
function wake() {
  if (draining) {
    again = true;
    return;
  }
  draining = drain()
    .catch((err) => {
      console.error(err.message);
      process.exit(1);
    })
    .finally(() => {
      draining = null;
      if (again) {
        again = false;
        wake();
      }
    });
}

async function main() {
  await client.connect();
  client.on('notification', (msg) => {
    if (kinds.includes(msg.payload)) wake();
  });
  client.on('error', (err) => {
    console.error(err.message);
    process.exit(1);
  });
  await client.query('LISTEN webhook_inbox_effects');
  const { rows } = await client.query(
    'SELECT count(*)::int AS n FROM webhook_inbox.stripe_subscriptions WHERE NOT deleted');
  console.log(`listening for ${kinds.join(',')} effects as ${worker}; ${rows[0].n} subscriptions mirrored`);
  wake();
  setInterval(wake, pollMs);
}

main().catch((err) => {
  console.error(err.message);
  process.exit(1);
});
