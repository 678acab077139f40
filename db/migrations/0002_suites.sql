-- 0002_suites: suites (a set of jobs submitted as one unit) and the result rows
-- that dashboards and history read, one per (job, variant), keyed by METHOD.md's
-- result identity.

CREATE TABLE suites (
    id         bigserial PRIMARY KEY,
    name       text NOT NULL DEFAULT '',
    spec       jsonb NOT NULL CHECK (jsonb_typeof(spec) = 'object'),
    created_at timestamptz NOT NULL DEFAULT now()
);

ALTER TABLE jobs ADD COLUMN suite_id bigint REFERENCES suites (id) ON DELETE SET NULL;
CREATE INDEX jobs_suite_idx ON jobs (suite_id, id) WHERE suite_id IS NOT NULL;

-- One history series per result identity (METHOD.md): workload, engine, variant,
-- device name, dtype, batch size, software versions; the workload's params join
-- them, since a different shape is a different measurement.  FusionBench's own
-- revision is not part of it: it is the code under test, whose changes history
-- is there to catch.  ident is md5 of the canonical text of all of them.
CREATE TABLE result_series (
    id          bigserial UNIQUE,
    ident       text PRIMARY KEY,
    workload    text NOT NULL,
    engine      text NOT NULL,
    device      text NOT NULL, -- kind: cpu, cuda
    device_name text NOT NULL,
    dtype       text NOT NULL,
    batch_size  integer NOT NULL,
    variant     text NOT NULL,
    params      jsonb NOT NULL,
    versions    jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
-- A series row is written once, when its identity first appears, and never
-- updated: a counter or "latest" here would rewrite the row on every result and
-- bloat this small, hot table (the newest points come from result_rows_ident_idx).
CREATE INDEX result_series_workload_idx ON result_series (workload, id);

-- A point of a series: one variant of one succeeded job, with the figures the
-- dashboards show and the raw samples regression checks need.
CREATE TABLE result_rows (
    job_id         bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    variant        text NOT NULL,
    ident          text NOT NULL,
    status         text NOT NULL,
    median_ms      double precision,
    ci95_lo        double precision,
    ci95_hi        double precision,
    speedup        double precision,
    kernels        bigint,
    fused_kernels  bigint,
    peak_mem_bytes bigint,
    samples        double precision[],
    created_at     timestamptz NOT NULL,
    PRIMARY KEY (job_id, variant)
);
-- History of one identity, newest first: the results endpoint reads the last
-- points of each series through this index.
CREATE INDEX result_rows_ident_idx ON result_rows (ident, job_id DESC);

CREATE FUNCTION fb_num(v jsonb) RETURNS double precision
LANGUAGE sql IMMUTABLE AS
$$ SELECT CASE WHEN jsonb_typeof(v) = 'number' THEN v::text::double precision END $$;

-- Expands a result into result_rows and result_series; run by the trigger on
-- results, so the worker's completing transaction writes them too.
CREATE FUNCTION fb_result_rows_write(p_job bigint, p_result jsonb, p_at timestamptz)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    j        jobs%ROWTYPE;
    env      jsonb := COALESCE(p_result -> 'env', '{}'::jsonb);
    versions jsonb;
    dname    text;
    v        jsonb;
    idt      text;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    versions := jsonb_strip_nulls(jsonb_build_object(
        'driver', env -> 'driver', 'cuda', env -> 'cuda', 'cudnn', env -> 'cudnn',
        'cublas', env -> 'cublas', 'torch', env -> 'torch', 'triton', env -> 'triton',
        'blas', env -> 'blas', 'threads', env -> 'threads'));
    dname := COALESCE(env ->> 'device_name', env ->> 'cpu', j.device);
    FOR v IN SELECT * FROM jsonb_array_elements(COALESCE(p_result -> 'variants', '[]'::jsonb))
    LOOP
        idt := md5(concat_ws(E'\x1f', j.workload, j.engine, v ->> 'name', dname, j.dtype,
                             j.batch_size::text, COALESCE(j.spec -> 'params', '{}'::jsonb)::text,
                             versions::text));
        INSERT INTO result_series (ident, workload, engine, device, device_name, dtype,
                                   batch_size, variant, params, versions, created_at)
        VALUES (idt, j.workload, j.engine, j.device, dname, j.dtype, j.batch_size, v ->> 'name',
                COALESCE(j.spec -> 'params', '{}'::jsonb), versions, p_at)
        ON CONFLICT (ident) DO NOTHING;
        INSERT INTO result_rows (job_id, variant, ident, status, median_ms, ci95_lo, ci95_hi,
                                 speedup, kernels, fused_kernels, peak_mem_bytes, samples,
                                 created_at)
        VALUES (p_job, v ->> 'name', idt, COALESCE(v ->> 'status', 'error'),
                fb_num(v -> 'latency_ms' -> 'median'), fb_num(v -> 'latency_ms' -> 'ci95' -> 0),
                fb_num(v -> 'latency_ms' -> 'ci95' -> 1),
                fb_num(p_result -> 'comparison' -> 'speedup' -> (v ->> 'name')),
                fb_num(v -> 'kernels')::bigint, fb_num(v -> 'fused_kernels')::bigint,
                fb_num(v -> 'peak_mem_bytes')::bigint,
                ARRAY(SELECT fb_num(s) FROM jsonb_array_elements(
                          CASE WHEN jsonb_typeof(v -> 'samples_ms') = 'array'
                               THEN v -> 'samples_ms' ELSE '[]'::jsonb END) s),
                p_at)
        ON CONFLICT (job_id, variant) DO NOTHING;
    END LOOP;
END $$;

CREATE FUNCTION fb_results_trigger() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM fb_result_rows_write(NEW.job_id, NEW.result, NEW.created_at);
    RETURN NULL;
END $$;

CREATE TRIGGER results_rows_trg AFTER INSERT ON results
    FOR EACH ROW EXECUTE FUNCTION fb_results_trigger();

-- Results stored before this migration join their series too.
SELECT fb_result_rows_write(job_id, result, created_at) FROM results ORDER BY job_id;
