-- 0004_workers_lifecycle: workers that come and go (docs/DEPLOY.md).
--
-- Drain: an operator asks a worker to finish its running job, claim nothing
-- more and exit (POST /api/v1/workers/{id}/drain sets drain_requested; the
-- worker reads it back with its heartbeat).  A worker that drains, for that or
-- for a SIGTERM, reports state 'draining'.  Registering again clears the flag:
-- a new process under the same id starts afresh.
ALTER TABLE workers ADD COLUMN drain_requested boolean NOT NULL DEFAULT false;
ALTER TABLE workers DROP CONSTRAINT workers_state_check;
ALTER TABLE workers ADD CONSTRAINT workers_state_check
    CHECK (state IN ('idle', 'busy', 'draining', 'stopped'));

-- The built-in catalog: what the engines compiled into a server offer, written
-- by the server at start, one row per engine and set of devices built
-- ("native/cpu", "native/cpu,cuda"): servers built with and without CUDA may
-- share one database without overwriting each other.  With the registrations
-- of every worker ever seen (workers.workloads, kept after a worker stops), it
-- is the catalog a submit is checked against, so that a job for a device no
-- live worker serves (GPU workers scaled to zero) is queued, not refused.
CREATE TABLE catalog_builtin (
    source     text PRIMARY KEY,
    workloads  jsonb NOT NULL CHECK (jsonb_typeof(workloads) = 'array'),
    updated_at timestamptz NOT NULL DEFAULT now()
);
