/*
 * worker.h
 *		The background worker process (worker.c): its entry point.
 *		Registration is declared in webhook_inbox.h for _PG_init.
 */
#ifndef WI_WORKER_H
#define WI_WORKER_H

#include "postgres.h"

PGDLLEXPORT extern void wi_worker_main(Datum arg);

#endif							/* WI_WORKER_H */
