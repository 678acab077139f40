-- 0001_init: the job queue, results, kernel rows and workers.
-- schema_migrations is created by the migrator (db_migrate.c), not here.

CREATE TABLE jobs (
    id               bigserial PRIMARY KEY,
    state            text NOT NULL DEFAULT 'queued'
                     CHECK (state IN ('queued', 'running', 'succeeded', 'failed', 'canceled')),
    spec             jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    workload         text NOT NULL,
    engine           text NOT NULL,
    device           text NOT NULL,
    dtype            text NOT NULL,
    batch_size       integer NOT NULL CHECK (batch_size >= 1),
    priority         integer NOT NULL DEFAULT 0,
    attempt          integer NOT NULL DEFAULT 0 CHECK (attempt >= 0),
    max_attempts     integer NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    timeout_s        integer NOT NULL CHECK (timeout_s >= 1),
    progress         jsonb,
    worker           text,
    cancel_requested boolean NOT NULL DEFAULT false,
    error            jsonb,
    -- backoff: a requeued job is not claimed before this
    not_before       timestamptz NOT NULL DEFAULT now(),
    heartbeat_at     timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    started_at       timestamptz,
    finished_at      timestamptz,
    -- a running job always has an owner and a heartbeat (the rescuer relies on it)
    CHECK (state <> 'running' OR (worker IS NOT NULL AND heartbeat_at IS NOT NULL))
);

-- Claim: the queued jobs only, in claim order.
CREATE INDEX jobs_claim_idx ON jobs (priority DESC, id) WHERE state = 'queued';
-- Rescuer: running jobs by heartbeat age.
CREATE INDEX jobs_rescue_idx ON jobs (heartbeat_at) WHERE state = 'running';
-- Listing is newest first by id (the primary key serves the unfiltered list);
-- these serve the common filters with the same order.
CREATE INDEX jobs_state_list_idx ON jobs (state, id DESC);
CREATE INDEX jobs_workload_list_idx ON jobs (workload, id DESC);
-- Label filter: spec->'labels' @> {"key": "value"}.
CREATE INDEX jobs_labels_idx ON jobs USING gin ((spec -> 'labels') jsonb_path_ops);

-- Exactly one result per job, written in the transaction that completes it.
CREATE TABLE results (
    job_id     bigint PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,
    attempt    integer NOT NULL,
    result     jsonb NOT NULL CHECK (jsonb_typeof(result) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now()
);

-- Per-kernel rows of a profiled iteration, in the order the worker reported them.
CREATE TABLE kernels (
    job_id  bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    variant text NOT NULL,
    ord     integer NOT NULL CHECK (ord >= 0),
    row     jsonb NOT NULL,
    PRIMARY KEY (job_id, variant, ord)
);

CREATE TABLE workers (
    id             text PRIMARY KEY,
    host           text NOT NULL,
    device         jsonb NOT NULL,
    engines        jsonb NOT NULL CHECK (jsonb_typeof(engines) = 'array'),
    workloads      jsonb NOT NULL CHECK (jsonb_typeof(workloads) = 'array'),
    state          text NOT NULL DEFAULT 'idle' CHECK (state IN ('idle', 'busy', 'stopped')),
    current_job    bigint,
    started_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat timestamptz NOT NULL DEFAULT now()
);
