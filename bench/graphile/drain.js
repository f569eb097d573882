// Graphile Worker's no-op drain: COUNT jobs that do nothing, added in one
// statement, then drained by a worker with CONCURRENCY job slots.  Prints
// jobs/s over the span from the first job started to the last finished.
//
//   node drain.js CONNECTION_STRING COUNT [CONCURRENCY]
const { run, runMigrations } = require("graphile-worker");
const { Pool } = require("pg");

async function main() {
	const [conn, countArg, concArg] = process.argv.slice(2);
	const count = parseInt(countArg, 10);
	const concurrency = parseInt(concArg || "4", 10);
	const pool = new Pool({ connectionString: conn, max: concurrency + 2 });

	await runMigrations({ pgPool: pool });
	await pool.query("DELETE FROM graphile_worker._private_jobs");
	await pool.query(
		"SELECT graphile_worker.add_jobs(array_agg(j)) FROM " +
		"(SELECT ROW('noop', '{}'::json, NULL, NULL, NULL, NULL, NULL, NULL)::graphile_worker.job_spec AS j " +
		" FROM generate_series(1, $1)) x", [count]);

	let done = 0;
	let first = 0;
	let last = 0;
	let finished;
	const allDone = new Promise((resolve) => { finished = resolve; });
	const runner = await run({
		pgPool: pool,
		concurrency,
		noHandleSignals: true,
		pollInterval: 1000,
		logger: new (require("graphile-worker").Logger)(() => () => {}),
		taskList: {
			noop: async () => {
				if (first === 0) first = process.hrtime.bigint();
				done++;
				if (done >= count) {
					last = process.hrtime.bigint();
					finished();
				}
			},
		},
	});
	await allDone;
	await runner.stop();
	await pool.end();
	const secs = Number(last - first) / 1e9;
	console.log((count / secs).toFixed(3));
}

main().catch((e) => { console.error(e); process.exit(1); });
